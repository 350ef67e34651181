// Package ui is rig's workspace: a read-only HTTP view of every study on
// this machine (the same report page `rig study report` writes, and the
// live progress of a running execution), served on 127.0.0.1 only. A URL's
// random token opens it once and becomes an HttpOnly, SameSite=Strict
// session cookie; study names in its paths are checked by package layout's
// rule (through the daemon) before any file is read.
//
// It is not an API for changing anything: it answers GET and HEAD and
// nothing else, and it never listens beyond loopback. The daemon starts it
// and supplies what it shows through [Source]; the package reads no store
// itself.
package ui
