// Package api is the daemon's socket protocol as Go: the method names
// (defined once, served by daemon's dispatch and called by Client), the
// request and reply types, the stable error codes, and Client, the typed
// client the command line uses: one Go method per call, so a command never
// spells a method name or decodes into any.
//
// It is data and transport only. It imports no runner, store, engine or
// runtime package (the daemon converts their types to these at the
// boundary), so a program that only talks to a daemon does not link them.
// It is not the server (daemon), and it prints nothing: presentation is the
// command line's.
package api
