// Package report renders a study's results for people: one self-contained
// HTML file (inline CSS and inline SVG figures, no outside assets and no
// script), plus the same content as JSON and Markdown.
//
// It is a renderer only. It computes no statistics and decides nothing: the
// caller fills a [Data] from the analysis and the decision record, and the
// report shows exactly that, with missing values marked as missing rather
// than drawn as zeros. Model outputs are untrusted text and are always
// escaped.
package report
