// Package provision is rig's one reader of what is provisioned on this
// machine: it embeds the pin file that scripts/setup.sh reads, finds the cache
// ($RIG_CACHE first) and reads the installed.env the script writes there,
// both as typed paths (Load) and as the ${NAME} variables designs expand
// (Lookup). It does not install anything, start runtimes or decide which
// build a runtime runs (package runtimes does); `make setup` installs, and
// every error here says so.
package provision
