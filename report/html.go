package report

import (
	"rig/internal/wording"

	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var htmlTemplate string

//go:embed report.css
var htmlCSS string

// funcs are the formatters the HTML template uses; Markdown uses the same
// ones so the two never disagree on a number.
func funcs() template.FuncMap {
	return template.FuncMap{
		"css":          func() template.CSS { return template.CSS(htmlCSS) },
		"num":          num,
		"num2":         func(v float64) string { return fmt.Sprintf("%.2f", v) },
		"pct":          pct,
		"pval":         pval,
		"sci":          func(v float64) string { return fmt.Sprintf("%.2e", v) },
		"interval":     interval,
		"delta":        deltaText,
		"kl":           klText,
		"klDelta":      klDeltaText,
		"share":        shareText,
		"shareDelta":   shareDeltaText,
		"prob":         probText,
		"secs":         secondsText,
		"slots":        slotsText,
		"ms":           msText,
		"dms":          deltaMSText,
		"tokms":        perTokenText,
		"rel":          relText,
		"slug":         slug,
		"bytes":        bytesText,
		"energy":       energyText,
		"opt":          optNum,
		"short":        short,
		"deref":        func(v *float64) float64 { return *v },
		"detectable":   detectableText,
		"reading":      readingOf,
		"better":       better,
		"missing":      func() string { return Missing },
		"missingPairs": MissingText,
		"noLeader":     noLeader,
		"join":         strings.Join,
		"when":         when,
		"outcome":      wording.Outcome,
		"status":       func(s ReplayStatus) string { return strings.ReplaceAll(string(s), "_", " ") },
		"change":       func(c Change) string { return strings.ReplaceAll(string(c), "_", " ") },
		"armPass":      armPass,
		"armTasks":     armTasks,
		"flips":        flips,
		"classCounts":  classCounts,
		"filters":      func() []Filter { return Filters },
		"filterName":   filterName,
	}
}

func when(t time.Time) string {
	if t.IsZero() {
		return Missing
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// WriteHTML writes the report as one self-contained HTML file: inline CSS,
// inline SVG figures, one inline script allowed by its hash, the data it
// reads as JSON, and no reference to anything outside the file. Every
// string from d is escaped, model outputs included.
func WriteHTML(w io.Writer, d Data) error {
	if err := d.Validate(); err != nil {
		return err
	}
	t, err := template.New("report").Funcs(funcs()).Parse(htmlTemplate)
	if err != nil {
		return fmt.Errorf("report: parse HTML template: %w", err)
	}
	v, err := newView(d)
	if err != nil {
		return err
	}
	if err := t.Execute(w, v); err != nil {
		return fmt.Errorf("report: write HTML: %w", err)
	}
	return nil
}
