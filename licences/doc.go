// Package licences holds the licence registries and the check of a design's
// items against them. It answers one question before a study is registered:
// may this model, runtime, tool or dataset be put to this use, and which
// clause says so. The registry a design uses is the studio's own file layered
// over the one bundled with rig (licences/registry.json; see Set). The
// package does not read licence texts itself, fetch terms from the network,
// or judge what a clause means: a person reads the terms at the source and
// records the reading in the studio's registry.
package licences
