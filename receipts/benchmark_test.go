package receipts

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkPutReceipt measures one committed (fsynced) receipt write, the cost
// the run loop pays per trial.
func BenchmarkPutReceipt(b *testing.B) {
	ctx := context.Background()
	s, _ := openFrozenAt(b, filepath.Join(b.TempDir(), "s1.db"))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := s.PutReceipt(ctx, sample("a", fmt.Sprintf("t%d", i), 0, 1, Scored)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportCSV measures exporting a 2,000-receipt store.
func BenchmarkExportCSV(b *testing.B) {
	ctx := context.Background()
	s, _ := openFrozenAt(b, filepath.Join(b.TempDir(), "s1.db"))
	for i := range 2000 {
		if err := s.PutReceipt(ctx, sample("a", fmt.Sprintf("t%d", i), 0, 1, Scored)); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := s.Export(ctx, &buf, CSV); err != nil {
			b.Fatal(err)
		}
	}
}
