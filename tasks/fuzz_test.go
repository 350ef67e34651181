package tasks

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseBank(f *testing.F) {
	for _, name := range []string{"banks/extract-json.jsonl", "banks/fix-test.jsonl"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.SplitN(string(data), "\n", 4)
		f.Add([]byte(strings.Join(lines[:3], "\n")))
	}
	f.Add([]byte(testHeader + "\n" + testTask("a") + "\n" + testTask("a")))
	f.Add([]byte(testHeader + "\n{\"id\":"))
	f.Add([]byte(""))
	f.Add([]byte("{}\n{}"))
	f.Add([]byte(testHeader + "\n" + testTask("a") + "\n" + strings.Replace(testTask("b"), "2+2", "2\xff2", 1)))
	// Problems on several lines and fields, all reported.
	f.Add([]byte(testHeader + "\n" + strings.Replace(testTask("a"), `"easy"`, `"x"`, 1) + "\n{\"id\":\n" + testTask("a") + "\n" + strings.Replace(testTask("b"), `"qa"`, `"other"`, 1)))
	f.Add([]byte(`{"schema_version":1}` + "\n" + testTask("a") + "\n" + testTask("a")))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBank(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			if b != nil {
				t.Fatal("bank returned with an error")
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("a bank that is not UTF-8 was accepted")
		}
		// A parsed bank re-encodes to a bank with the same hash.
		var buf bytes.Buffer
		if err := b.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		b2, err := ParseBank(&buf, "fuzz2.jsonl")
		if err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		if b2.Hash != b.Hash {
			t.Fatalf("hash changed on re-encode")
		}
	})
}

func FuzzFirstJSONObject(f *testing.F) {
	for _, s := range []string{"```json\n{\"a\": 1}\n```", "{", "}{", `{"a":"}"}`, `x {"a":{"b":[1,2]}} y`, "{{{{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		obj, ok := FirstJSONObject(s)
		if ok && obj == nil {
			t.Fatal("ok with a nil object")
		}
	})
}

func FuzzImportKeys(f *testing.F) {
	m := BlindMap{Entries: []BlindEntry{{Label: "item-000001", TaskID: "t1"}}}
	f.Add(`{"label":"item-000001","task_id":"t1","text":"x","pass":true}`)
	f.Add(`{"label":"item-000001","task_id":"t1","text":"x","score":0.5}` + "\n" + `{"label":"item-000001"}`)
	f.Add(`{"label":`)
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ImportKeys(strings.NewReader(s), "k.jsonl", m)
		if err == nil && len(keys) != 1 {
			t.Fatalf("%d keys without an error", len(keys))
		}
	})
}
