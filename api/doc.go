// Package api is the daemon's socket protocol as Go: the method names
// (defined once, served by daemon's dispatch and called by Client), the
// request and reply types, the stable error codes and their sentinels, and
// Client, the typed client the command line uses: one Go method per call, so
// a command never spells a method name or decodes into any.
//
// It is for any program that talks to a daemon: the command line, the
// workspace (ui), the scale benchmark, a studio's own scripts. Such a program
// links this package and nothing of rig's engine: api imports the standard
// library and a few data-only packages of rig/internal (no cgo), and none of
// the study's data (studies), the runner, store, engine or runtimes, nor the
// card probe, the statistics, the task banks or the licence registry those
// pull in. What crosses the socket from those packages has its own type here
// (a study's state, audit and licence terms, a review, pins, a dry run's
// estimate), and the daemon converts at its boundary (daemon/boundary.go);
// deps_test.go holds the package to that.
//
// It is not the server (daemon), nor where the study's rules live: it
// validates nothing and decides nothing (the daemon does, with studies), and
// it prints nothing: presentation is the command line's.
package api
