package report

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// withSpeedCard is the sample report with a speed card on its first job
// kind: llama-server as the baseline and Ollama beside it, at the figures
// rig bench runtimes measured on Gemma 3 270M Q4_K_M at one thread
// (docs/runtimes.md, 2026-12-03).
func withSpeedCard() Data {
	d := SampleData()
	k := &d.Kinds[0]
	f := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	base := Speed{Arm: k.Arms[0].Arm, Runtime: "llama-server", Baseline: true, Timed: 40,
		PromptTokS: f(127.1), GenTokS: f(19.0), TTFTP50MS: f(3981), TTFTP99MS: f(4188), TPOTP50MS: f(53.42), TPOTP99MS: f(53.75),
		WallSeconds: f(7.4), PeakMemBytes: i64(343 << 20), EnergyJoules: f(481), EnergySource: "estimate"}
	oll := Speed{Arm: k.Arms[1].Arm, Runtime: "ollama", Timed: 38,
		PromptTokS: f(151.2), GenTokS: f(21.1), TTFTP50MS: f(3566), TTFTP99MS: f(4021), TPOTP50MS: f(52.29), TPOTP99MS: f(53.18),
		WallSeconds: f(6.9), PeakMemBytes: i64(643 << 20), EnergyJoules: f(448), EnergySource: "estimate",
		Slots: 4, TrialsPerS: f(0.42), OutputTokS: f(61.3), WallP50Seconds: f(9.1),
		LoadNote: "38 trials ran beside others on the runtime (slots 4): wall time and energy per trial are each one's share of its round's time and counter by its share of the tokens; peak memory is the runtime's over the round, the same for every trial in it"}
	rel := func(a, b *float64) *float64 { return f((*a - *b) / *b) }
	oll.Delta = &SpeedDelta{PromptTokS: rel(oll.PromptTokS, base.PromptTokS), GenTokS: rel(oll.GenTokS, base.GenTokS),
		TTFTP50: rel(oll.TTFTP50MS, base.TTFTP50MS), TTFTP99: rel(oll.TTFTP99MS, base.TTFTP99MS),
		TPOTP50: rel(oll.TPOTP50MS, base.TPOTP50MS), TPOTP99: rel(oll.TPOTP99MS, base.TPOTP99MS),
		Wall: rel(oll.WallSeconds, base.WallSeconds), PeakMem: f(float64(*oll.PeakMemBytes-*base.PeakMemBytes) / float64(*base.PeakMemBytes)),
		Energy: rel(oll.EnergyJoules, base.EnergyJoules)}
	k.Speed = []Speed{base, oll}
	return d
}

func TestSpeedCardInEveryFormat(t *testing.T) {
	d := withSpeedCard()
	oll := d.Kinds[0].Speed[1]
	// The figures and the changes against the baseline, as each format
	// must print them: +19% prompt tok/s (151.2 over 127.1), +87% memory.
	want := []string{"151.2 (" + relText(oll.Delta.PromptTokS) + ")", "21.1 (" + relText(oll.Delta.GenTokS) + ")",
		"3.57 s (" + relText(oll.Delta.TTFTP50) + ")", "52.3 ms (" + relText(oll.Delta.TPOTP50) + ")", "643 MiB (" + relText(oll.Delta.PeakMem) + ")"}
	if relText(oll.Delta.PromptTokS) != "+19%" || relText(oll.Delta.PeakMem) != "+87%" {
		t.Fatalf("changes %s and %s, want +19%% and +87%%", relText(oll.Delta.PromptTokS), relText(oll.Delta.PeakMem))
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "### Speed per arm") {
		t.Fatal("Markdown has no speed card")
	}
	for _, w := range want {
		if !strings.Contains(md.String(), w) {
			t.Errorf("Markdown speed card lacks %q", w)
		}
	}
	// The load: the slot count and throughput beside the latency, and how
	// shared trials were charged.
	if !strings.Contains(md.String(), "| ollama | 4 | 38 |") || !strings.Contains(md.String(), "| 9.1 s | 0.420 | 61.3 |") || !strings.Contains(md.String(), "slots 4): wall time and energy per trial") {
		t.Errorf("Markdown: the speed card lacks the slots, throughput or load note:\n%s", md.String())
	}
	// The baseline's row shows its figures and no change.
	if !strings.Contains(md.String(), "| 127.1 | 19.0 | 3.98 s | 4.19 s | 53.4 ms | 53.8 ms |") {
		t.Errorf("Markdown: the baseline's row is not its bare figures:\n%s", md.String())
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, d); err != nil {
		t.Fatal(err)
	}
	text := html.UnescapeString(page.String())
	for _, w := range []string{"Speed per arm", "151.2<br><span class=\"dim\">+19%</span>", "643 MiB<br><span class=\"dim\">+87%</span>", "TPOT p99", "Out tok/s (all slots)", "61.3", "(slots 4)"} {
		if !strings.Contains(text, w) {
			t.Errorf("HTML speed card lacks %q", w)
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var back Data
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	sp := back.Kinds[0].Speed
	if len(sp) != 2 || sp[0].Delta != nil || sp[1].Delta == nil || *sp[1].Delta.GenTokS != *oll.Delta.GenTokS || *sp[1].TTFTP99MS != 4021 {
		t.Errorf("JSON speed card did not round-trip: %+v", sp)
	}
}

func TestSpeedCardNamesKnownArms(t *testing.T) {
	d := withSpeedCard()
	d.Kinds[0].Speed[1].Arm = "ghost"
	err := d.Validate()
	if err == nil || !strings.Contains(err.Error(), "speed[1].arm") {
		t.Fatalf("a speed card for an unknown arm: %v, want an error naming speed[1].arm", err)
	}
}

// TestSpeedCardScreenshot renders the card in headless Chromium and keeps
// its picture (RIG_TEST_ARTIFACTS=DIR keeps it in DIR).
func TestSpeedCardScreenshot(t *testing.T) {
	d := withSpeedCard()
	dir := artifactDir(t)
	ctx, _ := openReport(t, d, dir)
	id := "speed-" + slug(d.Kinds[0].Name)
	cells := eval[int](t, ctx, `document.querySelectorAll("#`+id+` tbody td").length`)
	if cells != 2*15 {
		t.Fatalf("%d cells in the rendered speed card, want 30 (two arms, fifteen figures)", cells)
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.ScrollIntoView("#"+id, chromedp.ByID), chromedp.Screenshot("#"+id, &png, chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "speed.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("speed card: %s", filepath.Join(dir, "speed.png"))
}
