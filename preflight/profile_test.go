package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want Size
		err  bool
	}{
		{"8GiB", 8 * GiB, false},
		{"512MiB", 512 * MiB, false},
		{"1.5GiB", 3 * GiB / 2, false},
		{"8GB", 8e9, false},
		{"4096", 4096, false},
		{" 24 GiB ", 24 * GiB, false},
		{"1TiB", TiB, false},
		{"0", 0, true},
		{"0GiB", 0, true},
		{"-8GiB", 0, true},
		{"2TiB", 0, true},
		{"1025GiB", 0, true},
		{"8XB", 0, true},
		{"GiB", 0, true},
		{"", 0, true},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if c.err {
			if !errors.Is(err, ErrBadSize) {
				t.Errorf("ParseSize(%q) = %v, %v; want ErrBadSize", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestSizeTextRoundTrip(t *testing.T) {
	for _, s := range []Size{8 * GiB, 512 * MiB, 1234567, 3 * GiB / 2} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Size
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%d → %s → %d, %v", s, b, back, err)
		}
	}
}

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile("card=8GiB,ctx=8192,kv=q8_0,np=2,host=32GiB")
	if err != nil {
		t.Fatal(err)
	}
	if p.CardMemory != 8*GiB || p.Context != 8192 || p.KVGGMLType() != gguf.TypeQ8_0 || p.Slots() != 2 || !p.Simulated || p.HostMemory != 32*GiB {
		t.Errorf("parsed %+v", p)
	}
	bad := []struct{ spec, field string }{
		{"card=-8GiB,ctx=8192", "negative"},
		{"card=0,ctx=8192", "zero"},
		{"card=5TiB,ctx=8192", "1TiB"},
		{"card=8GiB,ctx=0", "context"},
		{"card=8GiB,ctx=-5", "context"},
		{"card=8GiB,ctx=4096,kv=q3", "kv_type"},
		{"card=8GiB,ctx=4096,offload=-3", "offload_layers"},
		{"card=8GiB,ctx=4096,np=1000", "parallel"},
		{"card=8GiB,ctx=4096,color=red", "unknown key"},
		{"ctx=4096", "card_memory"},
		{"card8GiB", "key=value"},
	}
	for _, b := range bad {
		_, err := ParseProfile(b.spec)
		if err == nil || !strings.Contains(err.Error(), b.field) {
			t.Errorf("ParseProfile(%q) = %v; want an error naming %q", b.spec, err, b.field)
		}
	}
}

func TestLoadCards(t *testing.T) {
	dir := t.TempDir()
	good := `{"cards": [{"name": "sim-8g", "card_memory": "8GiB", "context": 8192, "kv_type": "q8_0", "simulated": true},
	{"name": "sim-512m", "card_memory": "512MiB", "context": 2048, "simulated": true}]}`
	path := filepath.Join(dir, "cards.json")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	cards, err := LoadCards(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 2 || cards[1].CardMemory != 512*MiB {
		t.Fatalf("cards %+v", cards)
	}
	for _, c := range []struct{ body, want string }{
		{`{"cards": [{"name": "x", "card_memory": "-1GiB", "context": 1}]}`, "negative"},
		{`{"cards": [{"name": "x", "card_memory": "2TiB", "context": 1}]}`, "1TiB"},
		{`{"cards": [{"name": "x", "card_memory": "8GiB", "context": 1}, {"name": "x", "card_memory": "8GiB", "context": 1}]}`, "twice"},
		{`{"cards": [{"card_memory": "8GiB", "context": 1}]}`, "cards[0].name"},
		{`{"cards": [{"name": "x", "card_memory": "8GiB", "context": 1, "vram": 3}]}`, "unknown field"},
	} {
		_, err := ParseCards([]byte(c.body), "cards.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cards.json") {
			t.Errorf("ParseCards(%s) = %v; want an error naming cards.json and %q", c.body, err, c.want)
		}
	}
}

func TestListCardsWithoutGPUSaysSo(t *testing.T) {
	var buf bytes.Buffer
	cards := []Profile{{Name: "sim-8g", CardMemory: 8 * GiB, Context: 8192, Simulated: true}}
	if err := ListCards(context.Background(), &buf, cards); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if _, err := RealCards(context.Background()); errors.Is(err, ErrNoNVML) {
		if !strings.Contains(out, "real cards: none found") {
			t.Errorf("no NVML here but output does not say so:\n%s", out)
		}
	} else if err == nil && !strings.Contains(out, "real cards (NVML)") {
		t.Errorf("NVML works but no card listed:\n%s", out)
	}
	if !strings.Contains(out, "sim-8g") || !strings.Contains(out, "8GiB") || !strings.Contains(out, "bandwidth") {
		t.Errorf("declared card or caveat missing:\n%s", out)
	}
}

func TestRealCardsNVML(t *testing.T) {
	cards, err := RealCards(context.Background())
	if errors.Is(err, ErrNoNVML) {
		var ne *NVMLError
		if errors.As(err, &ne) || strings.Contains(err.Error(), "no NVIDIA card") {
			t.Skipf("no GPU on this machine, NVML path skipped: %v", err)
		}
		t.Fatalf("ErrNoNVML without a reason: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		if c.Total == 0 || c.Free > c.Total {
			t.Errorf("card %d: total %s free %s", c.Index, c.Total, c.Free)
		}
	}
}

func FuzzParseCards(f *testing.F) {
	f.Add([]byte(`{"cards": [{"name": "sim-8g", "card_memory": "8GiB", "context": 8192}]}`))
	f.Add([]byte(`{"cards": []}`))
	f.Add([]byte(`{"cards": [{"name": "a", "card_memory": "1.5GiB", "context": 1, "kv_type": "q4_0", "offload_layers": -1, "parallel": 4}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cards, err := ParseCards(b, "cards.json")
		if err != nil {
			return
		}
		for _, c := range cards {
			if c.Validate() != nil {
				t.Fatalf("accepted an invalid card %+v", c)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzParseProfile(f *testing.F) {
	f.Add("card=8GiB,ctx=8192,kv=q8_0")
	f.Add("card=512MiB,ctx=2048,offload=all,np=2,host=1GiB,nvml=0")
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := ParseProfile(spec)
		if err == nil && (p.CardMemory == 0 || p.CardMemory > MaxSize || p.Context <= 0) {
			t.Fatalf("accepted %q as %+v", spec, p)
		}
	})
}
