package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/tasks"
)

func newTasksImportKeysCommand() *cobra.Command {
	var mapFile, out string
	cmd := &cobra.Command{
		Use:   "import-keys KEYED --map MAP [--out FILE]",
		Short: "Read a reviewer's keyed file back and join it to its blinding map",
		Long: `import-keys reads the file rig tasks export-blind wrote, after a reviewer
filled pass (true/false) and/or score (0..1) and an optional note on every
line, and joins each label back to its arm, model, trial and task through the
blinding map. It is strict: every exported item must be keyed, once, with its
label and task_id unchanged; an error names file:line, the field and the fix.

The joined keys are written as JSONL (one per item: label, task, arm, model,
trial, pass, score, note) to --out, or to standard output.

Example:
  rig tasks import-keys review.jsonl --map review.map.json --out human-keys.jsonl

Exit status 0 when every item was keyed and joined; 1 otherwise (nothing is
written then).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mapFile == "" {
				return errors.New("import-keys needs --map MAP, the blinding map export-blind wrote")
			}
			m, err := readBlindMap(mapFile)
			if err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			keys, err := tasks.ImportKeys(f, args[0], m)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			pass := 0
			for _, k := range keys {
				if k.Pass != nil && *k.Pass {
					pass++
				}
				if err := enc.Encode(k); err != nil {
					return err
				}
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			if err := writeNew(out, buf.Bytes()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "joined %d keyed items (%d marked pass) to %s\n", len(keys), pass, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&mapFile, "map", "", "blinding map written by export-blind")
	cmd.Flags().StringVar(&out, "out", "", "file to write the joined keys to (JSONL; default standard output)")
	return cmd
}

func readBlindMap(file string) (tasks.BlindMap, error) {
	// A map has a line per task: no larger than the bank it blinds.
	data, err := sizecap.Cap{What: "blinding map", Limit: tasks.BankCap.Limit, Fix: "give the map export-blind wrote"}.ReadFile(file)
	if err != nil {
		return tasks.BlindMap{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m tasks.BlindMap
	if err := dec.Decode(&m); err != nil {
		return tasks.BlindMap{}, fmt.Errorf("%s: %s (give the map export-blind wrote, unedited)", file, jsonerr.Message(err))
	}
	if len(m.Entries) == 0 {
		return tasks.BlindMap{}, fmt.Errorf("%s: entries: empty (give the map export-blind wrote, unedited)", file)
	}
	return m, nil
}
