// Package licences holds the studio's licence registry (licences/registry.json)
// and the check of a design's items against it. It answers one question before
// a study is registered: may this model, runtime, tool or dataset be put to this
// use, and which clause says so. It does not read licence texts itself, fetch
// terms from the network, or judge what a clause means: a person reads the terms
// at the source and records the reading in the registry.
package licences
