// Package archcheck keeps docs/architecture.md true to the code: its test
// reads the document's import table and checks every package's imports
// against it, and holds the rules for arrows (leaves import only internal/;
// the command line imports no runner, store or engine). It has no code of
// its own and nothing imports it.
package archcheck
