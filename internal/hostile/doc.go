// Package hostile holds no code: its tests run every file of the committed
// hostile-input corpus (testdata/hostile at the repository root) through the
// parser a user's file of that kind reaches, and through the real daemon for
// the kinds the daemon reads. See docs/hostile-input.md.
//
// The corpus is generated; regenerate it after changing the generator:
//
//go:generate go test -run TestCorpusIsGenerated -update .
package hostile
