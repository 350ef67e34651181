// Package layout is the one owner of rig's on-disk layout: every path of a
// daemon's home (its studies, proposals and baseline), of a study's folder,
// of an execution's records and of a spool entry. It is also the one place
// that turns a name from outside (a study name, an execution id, a
// proposal id) into a folder, so it is where such a name is checked:
// a name that is not a name (a slash, "..", a NUL) never becomes a path.
//
// It is not a store and opens no file; the only I/O it does is Lstat, to
// refuse a study folder that is a symlink. Callers read and write the paths
// it gives them (through internal/atomicfile, receipts, genrecord).
package layout
