// Package testenv is what rig's tests share about the machine they run on:
// whether what `make setup` provides is there. It is for tests only (it
// imports testing); the product reads what is provisioned through
// internal/provision.
package testenv

import (
	"os"
	"testing"
)

// NeedsSetup stops a test that cannot run without what make setup provides
// (the provisioned runtimes and models, or a Debian package setup installs)
// when err says it is missing. Under CI=true, where .ci/run has just run
// setup, a missing piece is a failure, never a skip: a skip there would hide
// a broken install step. Elsewhere (a developer who has not run setup) the
// test skips, naming what is missing and the fix. A nil err does nothing.
func NeedsSetup(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing although setup ran (CI=true): %v", what, err)
	}
	t.Skipf("%s is missing (run make setup): %v", what, err)
}

// Long stops a long test (one that starts real runtimes or simulates for a
// while) under go test -short, saying what it would have run. Under CI=true
// the suite is meant to run whole, so -short there is a failure, never a
// quiet skip.
func Long(t testing.TB, what string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("-short under CI=true would skip: %s (CI runs the whole suite: make test)", what)
	}
	t.Skipf("-short: %s (run without -short)", what)
}
