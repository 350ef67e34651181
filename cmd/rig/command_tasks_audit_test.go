package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

func TestTasksAudit(t *testing.T) {
	lines := bankLines(t, extractBank)[:6]

	t.Run("explicit dir", func(t *testing.T) {
		bank := writeBank(t, t.TempDir(), lines)
		dir := filepath.Join(t.TempDir(), "records")
		out, err := runRig(t, "tasks", "audit", bank, "--audit-dir", dir)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b, err := tasks.LoadBank(bank)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := tasks.CheckAudited(b, dir)
		if err != nil {
			t.Fatalf("audit record not found where the command said: %v", err)
		}
		if rec.Tasks != len(lines)-1 {
			t.Errorf("record covers %d tasks, want %d", rec.Tasks, len(lines)-1)
		}
	})

	t.Run("default dir beside the bank", func(t *testing.T) {
		folder := t.TempDir()
		bank := writeBank(t, folder, lines)
		if _, err := runRig(t, "tasks", "audit", bank); err != nil {
			t.Fatal(err)
		}
		b, err := tasks.LoadBank(bank)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.CheckAudited(b, defaultAuditDir(bank)); err != nil {
			t.Errorf("no record in %s: %v", defaultAuditDir(bank), err)
		}
		if filepath.Dir(defaultAuditDir(bank)) != folder {
			t.Errorf("default audit dir %s is not beside the bank in %s", defaultAuditDir(bank), folder)
		}
	})

	t.Run("bad key writes nothing", func(t *testing.T) {
		bad := append([]string(nil), lines...)
		bad[1] = strings.Replace(bad[1], `"invoice_number":{"type":"string"}`, `"invoice_number":{"type":"number"}`, 1)
		bank := writeBank(t, t.TempDir(), bad)
		dir := filepath.Join(t.TempDir(), "records")
		_, err := runRig(t, "tasks", "audit", bank, "--audit-dir", dir)
		// The bank reader already refuses a key that contradicts its own
		// schema; either refusal must name the line and write nothing.
		if err == nil || !strings.Contains(err.Error(), "bank.jsonl:2") {
			t.Fatalf("err = %v, want it to name bank.jsonl:2", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("a failed audit wrote %d file(s)", len(ents))
		}
	})
}
