// Package fidelity measures how close an arm's model stays to a reference
// model on the same text: per token, the KL divergence of the arm's
// next-token distribution from the reference's over the full vocabulary,
// whether their top tokens agree, and the probability each gives the text's
// next token; per arm, the mean KL, its 99th percentile and the top-token
// agreement, each with an interval by bootstrap over units (a study's tasks,
// or the chunks of a fixed text), and per pair of arms the paired difference.
//
// It measures closeness to the reference model, not correctness, and grades
// nothing. The full-vocabulary logits exist only inside rig-prefill-score
// (replay/prefill/kl.cpp), which this package runs in rig's sandbox; it is
// not a replay (package replay checks kept log-probs against a tolerance).
// docs/fidelity.md says what it measures and how it is checked against
// llama.cpp's llama-perplexity --kl-divergence. A study's records
// (StudyFile) are written by the runner's fidelity step (package run) and
// read by the report.
package fidelity
