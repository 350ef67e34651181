// Package replaycost is `rig bench replay`: what replaying a kept row
// costs against generating it. It generates rows at several output caps on
// llama-server and Ollama through a replay.Stack, replays each the way `rig
// replay` does (and, on llama-server, in prefill mode beside it), and sets
// each replay's wall time beside its original generation's, measured in
// the same run on the same stack, against the goals (ReplayCostGoal,
// PrefillCostGoal).
//
// It is for pricing replay on this machine; it is not replay (package
// replay, which a study's report calls), and it decides nothing about a
// record or a study.
package replaycost
