package archcheck

import "testing"

// TestProtocolIsLight holds the protocol package to the leaves' rule: api
// imports nothing from rig but internal/, so a program that only talks to a
// daemon (ui, the command line's calls, a studio's script) links none of the
// study's data, the runner, the store or the engine, nor what those pull in
// (the card probe, the statistics, the task banks). api's own test
// (api/deps_test.go) checks the rest of its dependencies: no cgo, no gonum,
// no Temporal, not even through internal/.
func TestProtocolIsLight(t *testing.T) {
	code := goPackages(t)
	deps, ok := code["api"]
	if !ok {
		t.Fatal("no package api")
	}
	if len(deps) > 0 {
		t.Errorf("api imports %s: the protocol imports nothing from rig but internal/; give what crosses the socket its own type in api and convert at the daemon's boundary (daemon/boundary.go)", cell(deps))
	}
}
