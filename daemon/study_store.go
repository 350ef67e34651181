package daemon

import (
	"context"
	"encoding/json"
	"io"

	"rig/receipts"
)

// The study store's check and export, served by the executions resource
// (endpoint_executions.go).

// CheckStore runs the store's integrity check: every receipt decodes, keys are
// unique, and no trial is scored twice in an execution.
func (ex Executions) CheckStore(ctx context.Context, name string) (receipts.Summary, error) {
	st, err := ex.s.store(name)
	if err != nil {
		return receipts.Summary{}, err
	}
	return st.Check(ctx)
}

// Export writes every receipt of the study in the shared schema (jsonl or csv).
func (ex Executions) Export(ctx context.Context, name, format string, w io.Writer) error {
	st, err := ex.s.store(name)
	if err != nil {
		return err
	}
	f, err := receipts.ParseFormat(format)
	if err != nil {
		return err
	}
	return st.Export(ctx, w, f)
}

// ExportAudit writes the study store's audit trail, one transition per line:
// who (as the daemon read it from the socket), what, when and why.
func (ex Executions) ExportAudit(ctx context.Context, name string, w io.Writer) error {
	st, err := ex.s.store(name)
	if err != nil {
		return err
	}
	trail, err := st.Audit(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for _, t := range trail {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	return nil
}
