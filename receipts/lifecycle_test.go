package receipts

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestLifecycleWrittenWithItsTransition(t *testing.T) {
	ctx := context.Background()
	st, err := Open(filepath.Join(t.TempDir(), "s.bolt"), "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, found, err := st.Lifecycle(ctx); err != nil || found {
		t.Fatalf("new store: found=%v err=%v, want none", found, err)
	}
	d1 := []byte(`{"state":"draft"}`)
	if err := st.PutLifecycle(ctx, LifecycleChange{Doc: d1, Transition: &Transition{From: "", To: "draft", Who: "a", Why: "registered"}}); err != nil {
		t.Fatal(err)
	}
	// A failing review: the document changes, the state does not.
	d2 := []byte(`{"state":"draft","reviews":[1]}`)
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d1, Doc: d2}); err != nil {
		t.Fatal(err)
	}
	// Computed from an old read: refused, nothing written.
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d1, Doc: []byte(`{"state":"reviewed"}`), Transition: &Transition{From: "draft", To: "reviewed", Who: "r", Why: "pass"}}); !errors.Is(err, ErrStaleState) {
		t.Fatalf("stale write = %v, want ErrStaleState", err)
	}
	// A transition the store refuses writes no document either.
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d2, Doc: []byte(`{"state":"x"}`), Transition: &Transition{From: "approved", To: "frozen", Who: "r", Why: "w"}}); !errors.Is(err, ErrStaleState) {
		t.Fatalf("bad transition = %v, want ErrStaleState", err)
	}
	if doc, _, _ := st.Lifecycle(ctx); string(doc) != string(d2) {
		t.Fatalf("after refusals the lifecycle is %s, want %s", doc, d2)
	}
	d3 := []byte(`{"state":"approved"}`)
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d2, Doc: d3, Transition: &Transition{From: "draft", To: "approved", Who: "d", Why: "ok"}}); err != nil {
		t.Fatal(err)
	}
	d4 := []byte(`{"state":"frozen"}`)
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d3, Doc: d4, FreezeDesign: "h1", Transition: &Transition{From: "approved", To: "frozen", Who: "d", Why: "frozen"}}); err != nil {
		t.Fatal(err)
	}
	m, _ := st.Meta(ctx)
	if !m.Frozen || m.DesignHash != "h1" || m.State != "frozen" {
		t.Errorf("meta after freeze = %+v", m)
	}
	if err := st.PutLifecycle(ctx, LifecycleChange{Prev: d4, Doc: []byte(`{"state":"frozen","x":1}`), FreezeDesign: "h2", Transition: &Transition{From: "frozen", To: "frozen", Who: "d", Why: "again"}}); !errors.Is(err, ErrConflict) {
		t.Errorf("freeze under another hash = %v, want ErrConflict", err)
	}
	audit, err := st.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tos []string
	for _, a := range audit {
		tos = append(tos, a.To)
	}
	if len(tos) != 3 || tos[0] != "draft" || tos[1] != "approved" || tos[2] != "frozen" {
		t.Errorf("audit = %v, want draft, approved, frozen", tos)
	}
	if doc, found, _ := st.Lifecycle(ctx); !found || string(doc) != string(d4) {
		t.Errorf("lifecycle = %s, want %s", doc, d4)
	}
	if _, err := st.Check(ctx); err != nil {
		t.Errorf("store check: %v", err)
	}
}
