package studies

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"rig/preflight"
)

const cardDemoPath = "../examples/card-study/design.json"

func cardDemo(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(cardDemoPath)
	if err != nil {
		t.Fatalf("read bundled card sub-study: %v", err)
	}
	return b
}

func TestCardStudyExpandsIntoCells(t *testing.T) {
	d, err := ParseDesign("design.json", cardDemo(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Fatalf("bundled card sub-study does not validate:\n%v", err)
	}
	profiles := d.CardProfilesRun()
	if len(profiles) != 3 {
		t.Fatalf("card sub-study runs %d profiles, want 3", len(profiles))
	}
	if len(d.Arms) != 2*len(profiles) {
		t.Fatalf("%d cells, want %d (2 arms × %d profiles)", len(d.Arms), 2*len(profiles), len(profiles))
	}
	incumbents := 0
	for _, a := range d.Arms {
		if a.Card == nil || a.BaseArm == "" {
			t.Fatalf("cell %s carries no card", a.Name)
		}
		if want := a.BaseArm + "@" + a.Card.Name; a.Name != want {
			t.Errorf("cell name %q, want %q", a.Name, want)
		}
		if a.Role == RoleIncumbent {
			incumbents++
			if a.Card.Name != d.CardProfile.Name {
				t.Errorf("incumbent %s is not at the reference card %s", a.Name, d.CardProfile.Name)
			}
		}
		if p := PreflightProfile(d, a); p.CardMemory != preflight.Size(a.Card.MemoryMiB)*preflight.MiB || p.Name != a.Card.Name {
			t.Errorf("%s: preflight profile %s %v, want its own card %s", a.Name, p.Name, p.CardMemory, a.Card.Name)
		}
	}
	if incumbents != 1 {
		t.Errorf("%d incumbents, want 1", incumbents)
	}
	// Every step-down cell is paired with the same arm at the reference.
	if len(d.Pairs) != 2*(len(profiles)-1) {
		t.Fatalf("%d pairs, want %d", len(d.Pairs), 2*(len(profiles)-1))
	}
	for _, p := range d.Pairs {
		cb, _, _ := cellName(p.Challenger)
		ib, icard, _ := cellName(p.Incumbent)
		if cb != ib || icard != d.CardProfile.Name {
			t.Errorf("pair %s vs %s is not the same arm against the reference card", p.Challenger, p.Incumbent)
		}
	}
	// The snapshot stores the expanded design; reading it again must not
	// expand twice, and must hash the same.
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseDesign("snapshot.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Arms) != len(d.Arms) {
		t.Fatalf("re-reading the expanded design gives %d arms, want %d", len(again.Arms), len(d.Arms))
	}
	h1, _ := DesignHash(d)
	h2, _ := DesignHash(again)
	if h1 != h2 {
		t.Errorf("design hash changed on re-reading: %s vs %s", h1, h2)
	}
}

func TestCardStepDownContext(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(cardDemo(t), &m); err != nil {
		t.Fatal(err)
	}
	m["card_profiles"].([]any)[0].(map[string]any)["context"] = 1024
	b, _ := json.Marshal(m)
	d, err := ParseDesign("design.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Fatalf("a step-down context should validate (pins are shared within one card):\n%v", err)
	}
	for _, a := range d.Arms {
		want := 2048
		if a.Card.Name == "card-256mib" {
			want = 1024
		}
		if a.Pins.Context != want {
			t.Errorf("%s: context %d, want %d", a.Name, a.Pins.Context, want)
		}
	}
}

func TestCardStudyRejects(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		field string
		says  string
	}{
		{"negative card", func(m map[string]any) {
			m["card_profiles"].([]any)[0].(map[string]any)["memory_mib"] = -256
		}, "card_profiles[0].memory_mib", "above 0"},
		{"absurd card", func(m map[string]any) {
			m["card_profiles"].([]any)[1].(map[string]any)["memory_mib"] = 128 << 30
		}, "card_profiles[1].memory_mib", "not bytes"},
		{"duplicate profile", func(m map[string]any) {
			m["card_profiles"].([]any)[1].(map[string]any)["name"] = "card-512mib"
		}, "card_profiles[1].name", "already card_profile"},
		{"no step-down profile", func(m map[string]any) { delete(m, "card_profiles") }, "card_profiles", "at least one step-down"},
		{"unknown kind", func(m map[string]any) { m["kind"] = "cards" }, "kind", "\"card\""},
		{"profiles without the kind", func(m map[string]any) { delete(m, "kind") }, "card_profiles", "kind"},
		{"hand-written cell", func(m map[string]any) {
			delete(m, "kind")
			delete(m, "card_profiles")
			delete(m, "confirm_doesnt_fit")
			m["arms"].([]any)[0].(map[string]any)["base_arm"] = "x"
		}, "arms[0].card", "written by rig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(cardDemo(t), &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			b, _ := json.Marshal(m)
			d, err := ParseDesign("design.json", b)
			if err == nil {
				err = Validate(context.Background(), d, ValidateOptions{})
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error on %s, got %v", c.field, err)
			}
			found := false
			for _, p := range ve.Problems {
				if p.Path == c.field && strings.Contains(p.Msg, c.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem at %s saying %q:\n%v", c.field, c.says, err)
			}
		})
	}
}
