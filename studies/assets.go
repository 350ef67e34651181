package studies

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"rig/internal/gguf"
	"rig/tasks"
)

// BankAuditDir is where `rig tasks audit BANK` keeps a bank's audit records:
// "audits" beside the bank file.
func BankAuditDir(bank string) string { return filepath.Join(filepath.Dir(bank), "audits") }

// BankUsedFile is the record of the bank versions decided studies used (see
// tasks.UsedVersions), beside the bank's audit records: once a version is in
// it, tasks.FlipHoldout refuses to change that version's hold-out flags.
func BankUsedFile(bank string) string { return filepath.Join(BankAuditDir(bank), "used.json") }

// GGUFQuant reads a model file's quant from its GGUF header.
func GGUFQuant(path string) (string, error) { return GGUFQuantWith(os.Open)(path) }

// GGUFQuantWith is GGUFQuant opening the file with open: the daemon's opens
// it with its caller's rights, and reads the header of the very file it
// opened.
func GGUFQuantWith(open func(string) (*os.File, error)) QuantReader {
	return func(path string) (string, error) {
		f, err := ggufHeader(open, path)
		if err != nil {
			return "", err
		}
		ft, ok := f.Uint("general.file_type")
		if !ok {
			return "", fmt.Errorf("%s: no general.file_type in the GGUF header", path)
		}
		return gguf.FileTypeName(ft), nil
	}
}

// ggufHeader is gguf.Open opening the file with open.
func ggufHeader(open func(string) (*os.File, error), path string) (*gguf.File, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: open model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: stat %s: %w", path, err)
	}
	return gguf.Read(f, st.Size(), path)
}

// SampleByTemplate takes n tasks in turn from each template, so a sample
// covers every template before it takes any twice; n <= 0 keeps all.
func SampleByTemplate(ts []tasks.Task, n int) []string {
	var ids []string
	if n <= 0 || n >= len(ts) {
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
		return ids
	}
	byTemplate := map[string][]string{}
	var templates []string
	for _, t := range ts {
		if _, ok := byTemplate[t.TemplateID]; !ok {
			templates = append(templates, t.TemplateID)
		}
		byTemplate[t.TemplateID] = append(byTemplate[t.TemplateID], t.ID)
	}
	sort.Strings(templates)
	for _, tpl := range templates {
		sort.Strings(byTemplate[tpl])
	}
	for round := 0; len(ids) < n; round++ {
		for _, tpl := range templates {
			if round < len(byTemplate[tpl]) && len(ids) < n {
				ids = append(ids, byTemplate[tpl][round])
			}
		}
	}
	return ids
}
