// Package untrusted is how rig, on the host and with the daemon's rights,
// looks at a tree that contained code wrote: a harness's repository after
// its run. Nothing is followed through a symbolic link, only regular files
// are opened (fifos and devices never are), every walk is capped, and no
// program (git, tar, a shell) is run over the tree, because a tree the
// sandbox wrote can hold configuration that such a program obeys. (A
// runtime's log is read back by runtimes, through the descriptor it was
// created with.)
//
// It contains nothing itself: it is not a sandbox, and it trusts the folders
// above the path it is given (they must be rig's own, never writable from
// inside a sandbox).
package untrusted
