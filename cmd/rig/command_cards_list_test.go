package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCardsList(t *testing.T) {
	cards := filepath.Join(t.TempDir(), "cards.json")
	if err := os.WriteFile(cards, []byte(`{"cards":[{"name":"sim-6g","card_memory":"6GiB","context":4096,"simulated":true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "none declared", want: []string{"real cards", "simulated cards: none declared"}},
		{name: "simulated sizes", args: []string{"--simulated", "8GiB,12GiB", "--context", "2048"}, want: []string{"8GiB", "12GiB", "2048"}},
		{name: "card list file", args: []string{"--cards", cards}, want: []string{"sim-6g"}},
		{name: "bad size", args: []string{"--simulated", "8 elephants"}, wantErr: "8 elephants"},
		{name: "missing card list", args: []string{"--cards", cards + ".absent"}, wantErr: "absent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runRig(t, append([]string{"cards", "list"}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
