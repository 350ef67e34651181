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
