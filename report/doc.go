// Package report renders a study's results for people: one self-contained
// HTML file (inline CSS, inline SVG figures and one inline script,
// report.js, allowed by its hash in the page's Content-Security-Policy and
// reading only the page's own JSON block; no outside assets), plus the same
// content as JSON and Markdown. The script draws the gate slider, the
// paired-rows matrix and its detail panel, writing text only.
//
// It is a renderer only. It computes no statistics and decides nothing: the
// caller fills a [Data] from the analysis and the decision record, and the
// report shows exactly that, with missing values marked as missing rather
// than drawn as zeros. Model outputs are untrusted text and are always
// escaped.
package report
