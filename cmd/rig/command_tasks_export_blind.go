package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/spf13/cobra"

	"rig/internal/jsonerr"
	"rig/tasks"
)

func newTasksExportBlindCommand() *cobra.Command {
	o := &exportBlindOptions{}
	cmd := &cobra.Command{
		Use:   "export-blind --candidates FILE --controls FILE --out ITEMS --map MAP",
		Short: "Write candidate and control outputs, shuffled and unnamed, for a human reviewer",
		Long: `export-blind mixes candidate outputs with incumbent control outputs, shuffles
them under random labels (drawn from --seed) and writes one JSONL line per item
for a reviewer: label, task, prompt (from --bank) and text, with pass and score
left null for the reviewer to fill. Arm names, model names, their short forms
and every --identity are redacted from the texts, and the file is checked to
name no source. The blinding map (label -> arm, model, trial) goes to --map, to
be kept apart from the reviewer until the keys come back.

Both output files are JSONL, one tasks.Output a line:
  {"trial_id":"t1","task_id":"xj-invoice-1","arm":"gemma3-ollama","model":"gemma3:270m","text":"..."}

Example:
  rig tasks export-blind --bank tasks/banks/extract-json.jsonl \
      --candidates cand.jsonl --controls incumbent.jsonl --out review.jsonl --map review.map.json
  # the reviewer fills pass/score in review.jsonl, then:
  rig tasks import-keys review.jsonl --map review.map.json

Neither --out nor --map is ever overwritten. Exit status 0 when both were
written; 1 when an input does not parse, a text still names its source, or a
file exists or cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.candidates, "candidates", "", "JSONL of candidate outputs")
	f.StringVar(&o.controls, "controls", "", "JSONL of incumbent control outputs")
	f.StringVar(&o.bank, "bank", "", "task bank that supplies each item's prompt")
	f.StringVar(&o.out, "out", "", "reviewer file to write (JSONL)")
	f.StringVar(&o.mapFile, "map", "", "blinding map to write (JSON); keep it apart")
	f.StringArrayVar(&o.identities, "identity", nil, "another name to redact, e.g. a registry id (repeatable)")
	f.Uint64Var(&o.seed, "seed", 0, "shuffle seed (default: drawn at random and recorded in the map)")
	return cmd
}

// exportBlindOptions are rig tasks export-blind's flags.
type exportBlindOptions struct {
	candidates, controls, bank, out, mapFile string
	identities                               []string
	seed                                     uint64
}

// run blinds the candidate and control outputs and writes the reviewer's
// items and the blinding map, neither over an existing file.
func (o *exportBlindOptions) run(cmd *cobra.Command) error {
	if o.candidates == "" || o.out == "" || o.mapFile == "" {
		return errors.New("export-blind needs --candidates FILE, --out ITEMS and --map MAP (see rig tasks export-blind --help)")
	}
	cands, err := readOutputs(o.candidates)
	if err != nil {
		return err
	}
	var ctrls []tasks.Output
	if o.controls != "" {
		if ctrls, err = readOutputs(o.controls); err != nil {
			return err
		}
	}
	var b *tasks.Bank
	if o.bank != "" {
		if b, err = tasks.LoadBank(o.bank); err != nil {
			return err
		}
	}
	if !cmd.Flags().Changed("seed") {
		o.seed = rand.Uint64()
	}
	var items bytes.Buffer
	m, err := tasks.ExportBlind(&items, b, cands, ctrls, o.seed, o.identities...)
	if err != nil {
		return err
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	// The map is written first: items without their map cannot be
	// joined back, a map without items is only a stray file.
	if err := writeNew(o.mapFile, append(mj, '\n')); err != nil {
		return err
	}
	if err := writeNew(o.out, items.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %d items (%d candidate, %d control) to %s; blinding map (seed %d) to %s: keep it from the reviewer\n",
		len(m.Entries), len(cands), len(ctrls), o.out, o.seed, o.mapFile)
	return nil
}

// readOutputs reads a JSONL file of trial outputs.
func readOutputs(file string) ([]tasks.Output, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseOutputs(f, file)
}

// parseOutputs decodes strictly, so a misspelt field is reported rather than
// silently exported as an empty text.
func parseOutputs(r io.Reader, file string) ([]tasks.Output, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var outs []tasks.Output
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var o tasks.Output
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%s:%d: %s (one JSON object a line with task_id, arm, model, text, files, trial_id)", file, line, jsonerr.Message(err))
		}
		if dec.More() {
			return nil, fmt.Errorf("%s:%d: text after the JSON object (one object a line)", file, line)
		}
		if o.TaskID == "" {
			return nil, fmt.Errorf("%s:%d: task_id: missing (name the task the output answers)", file, line)
		}
		outs = append(outs, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("%s: no outputs (one JSON object a line)", file)
	}
	return outs, nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists already (move it away, or give another path)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
