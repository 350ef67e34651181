package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	gp "github.com/gpustack/gguf-parser-go"
)

func tinyBytes(t testing.TB, seed uint64) []byte {
	t.Helper()
	b, err := Tiny(TinyOptions{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTypeTraitsMatchGGUFParser(t *testing.T) {
	for ty := GGMLType(0); ty <= TypeMXFP4; ty++ {
		if !ty.Known() {
			continue
		}
		tt, ok := gp.GGMLType(ty).Trait()
		if !ok {
			t.Errorf("%s (%d): gguf-parser-go does not know this type", ty, uint32(ty))
			continue
		}
		if tt.BlockSize != ty.BlockSize() || tt.TypeSize != ty.TypeSize() {
			t.Errorf("%s: block %d/%d bytes, gguf-parser-go says %d/%d", ty, ty.BlockSize(), ty.TypeSize(), tt.BlockSize, tt.TypeSize)
		}
	}
	for _, name := range []string{"q4_0", "Q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs", "iq4_xs", "iq1_m", "f16", "bf16", "f32", "mxfp4"} {
		if _, err := ParseGGMLType(name); err != nil {
			t.Errorf("ParseGGMLType(%q): %v", name, err)
		}
	}
}

func TestReadTinyMatchesGGUFParser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteTiny(path, TinyOptions{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := gp.ParseGGUFFile(path)
	if err != nil {
		t.Fatalf("gguf-parser-go cannot read the tiny model: %v", err)
	}
	if len(f.Tensors) != len(ref.TensorInfos) || len(f.Metadata) != len(ref.Header.MetadataKV) {
		t.Fatalf("got %d tensors %d kv, gguf-parser-go %d tensors %d kv", len(f.Tensors), len(f.Metadata), len(ref.TensorInfos), len(ref.Header.MetadataKV))
	}
	for i, ti := range f.Tensors {
		r := ref.TensorInfos[i]
		if ti.Name != r.Name || uint32(ti.Type) != uint32(r.Type) || ti.Offset != r.Offset || ti.Bytes() != r.Bytes() {
			t.Errorf("tensor %d: %s %s off %d bytes %d; gguf-parser-go %s %s off %d bytes %d", i, ti.Name, ti.Type, ti.Offset, ti.Bytes(), r.Name, r.Type, r.Offset, r.Bytes())
		}
	}
	if f.DataOffset != ref.TensorDataStartOffset {
		t.Errorf("data offset %d, gguf-parser-go %d", f.DataOffset, ref.TensorDataStartOffset)
	}
	if f.Architecture() != "llama" {
		t.Errorf("architecture %q", f.Architecture())
	}
	if n, _ := f.Uint("llama.block_count"); n != 2 {
		t.Errorf("block_count %d", n)
	}
	toks, _ := f.Get("tokenizer.ggml.tokens")
	if s, ok := toks.([]string); !ok || len(s) < 131 || s[3+10] != "<0x0A>" {
		t.Errorf("tokens: %T len %d", toks, len(toks.([]string)))
	}
	if int64(f.Size) < 100<<10 || f.Size > 1<<20 {
		t.Errorf("tiny model is %d bytes; want a few hundred KB", f.Size)
	}
}

func TestTinySeedsDiffer(t *testing.T) {
	a, b, a2 := tinyBytes(t, 1), tinyBytes(t, 2), tinyBytes(t, 1)
	if bytes.Equal(a, b) {
		t.Error("seeds 1 and 2 gave the same model")
	}
	if !bytes.Equal(a, a2) {
		t.Error("seed 1 is not deterministic")
	}
}

// corrupt returns a copy of b with fn applied.
func corrupt(b []byte, fn func([]byte) []byte) []byte {
	c := append([]byte(nil), b...)
	return fn(c)
}

func TestReadRejectsBadFiles(t *testing.T) {
	good := tinyBytes(t, 3)
	f, err := Read(bytes.NewReader(good), int64(len(good)), "good.gguf")
	if err != nil {
		t.Fatal(err)
	}
	// Byte position of the first tensor's type field: after its name, n_dims and dims.
	// The first tensor's type field follows its name, n_dims and dims.
	name := f.Tensors[0].Name
	firstTensorType := bytes.Index(good, []byte(name)) + len(name) + 4 + 8*len(f.Tensors[0].Dims)
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"bad magic", corrupt(good, func(b []byte) []byte { copy(b, "GGML"); return b }), ErrNotGGUF},
		{"version 1", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1); return b }), ErrUnsupportedVersion},
		{"version 9", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 9); return b }), ErrUnsupportedVersion},
		{"header cut", good[:20], ErrTruncated},
		{"metadata cut", good[:200], ErrTruncated},
		{"data cut", good[:len(good)-100], ErrTruncated},
		{"absurd kv count", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<50); return b }), ErrCorrupt},
		{"absurd tensor count", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 1<<50); return b }), ErrCorrupt},
		{"unknown tensor type", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[firstTensorType:], 4); return b }), ErrUnknownTensorType},
		{"huge key length", corrupt(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 1<<40); return b }), ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.data), int64(len(c.data)), "model.gguf")
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != "model.gguf" {
				t.Fatalf("error %v does not name the file", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte("model.gguf: offset ")) {
				t.Errorf("error %q does not give the offset", err)
			}
		})
	}
}

func TestOpenMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.gguf"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// FuzzReadGGUF checks that no input panics or allocates without bound, and
// that a successful read describes tensors that lie inside the file.
func FuzzReadGGUF(f *testing.F) {
	good, err := Tiny(TinyOptions{Seed: 1, Layers: 1, Embd: 32, Heads: 2, KVHeads: 1, FF: 32})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:64])
	f.Add(good[:len(good)/2])
	var small bytes.Buffer
	_ = Encode(&small, []KV{{"general.architecture", ValueString, "llama"}, {"a.b", ValueArray, []uint32{1, 2}}, {"c", ValueFloat64, 1.5}, {"d", ValueBool, true}, {"e", ValueInt16, int16(-3)}},
		[]Tensor{{TensorInfo{Name: "w", Dims: []uint64{32, 2}, Type: TypeQ4_0}, make([]byte, 36)}})
	f.Add(small.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Read(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FormatError: %v", err)
			}
			return
		}
		for _, ti := range g.Tensors {
			if uint64(g.DataOffset)+ti.Offset+ti.Bytes() > uint64(len(data)) {
				t.Fatalf("tensor %q lies outside the file", ti.Name)
			}
		}
	})
}

// BenchmarkReadGGUF measures header reading of the tiny model; the real
// models' headers (262k-token vocabularies) are read the same way.
func BenchmarkReadGGUF(b *testing.B) {
	data, err := Tiny(TinyOptions{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), int64(len(data)), "tiny.gguf"); err != nil {
			b.Fatal(err)
		}
	}
}
