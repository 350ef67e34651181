package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
)

// TestPromptEchoesReachTheAnalysis: a kept output that repeats its
// rendered prompt marks its trial RepeatsPrompt in the analysis input, so
// the stop-cap warning can say so; an answer does not, and neither does a
// judge's call.
func TestPromptEchoesReachTheAnalysis(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	x, err := c.svc.execution(c.name, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(x.Generations()), 0o700); err != nil {
		t.Fatal(err)
	}
	path := strings.Replace(x.Generations(), "*", "test", 1)
	pins := genrecord.Pins{ModelSHA256: strings.Repeat("a", 64), ModelName: "m", Runtime: "llama-server", RuntimeVersion: "b1",
		BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{}, MachineLine: "test", DesignHash: c.snap.DesignHash, StudyID: c.name, ExecutionID: "exec-1"}
	w, err := genrecord.OpenWriter(path, pins)
	if err != nil {
		t.Fatal(err)
	}
	prompt := "<start_of_turn>user\nExtract the invoice number and the total from this message as JSON with the fields number and total. Message: invoice 4417 was paid on Monday, the total was 12 euros and the customer asked for a receipt.<end_of_turn>\n<start_of_turn>model\n"
	arm := "smollm2-llama-server@simulated-1gib"
	rows := []struct {
		id, key, text string
		role          genrecord.Role
	}{
		{"r1", arm + "/extract-json/t1/1#1", "Extract the invoice number and the total from this message as JSON with the fields number and total. Message: invoice 4417 was paid mendatang 受信", genrecord.RoleCandidate},
		{"r2", arm + "/extract-json/t2/1#1", `{"number": "4417", "total": 12}`, genrecord.RoleCandidate},
		{"r3", "judge/extract-json/t3/1#1", "Extract the invoice number and the total from this message as JSON with the fields number and total. Message: invoice 4417 was paid", genrecord.RoleJudge},
	}
	for _, r := range rows {
		if err := w.Append(genrecord.Row{RowID: r.id, Arm: arm, Prompt: r.key, Role: r.role, RenderedPrompt: prompt, K: 1,
			Output: []genrecord.Step{}, StopReason: genrecord.StopLength, Text: r.text}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := c.svc.Reports().Analyse(ctx, c.name, "")
	if err != nil {
		t.Fatal(err)
	}
	echoes := map[string]bool{}
	for _, tr := range a.Input.Trials {
		if tr.RepeatsPrompt {
			echoes[tr.Arm+"/"+tr.Task] = true
		}
	}
	if len(echoes) != 1 || !echoes[arm+"/t1"] {
		t.Errorf("trials marked as repeating the prompt: %v, want only %s/t1", echoes, arm)
	}
}
