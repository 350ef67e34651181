package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
)

// The errors a GGUF read can end in; each is wrapped in a *FormatError that
// names the file and the byte offset.
var (
	ErrNotGGUF            = errors.New("not a GGUF file (bad magic)")
	ErrUnsupportedVersion = errors.New("unsupported GGUF version (rig reads 2 and 3)")
	ErrTruncated          = errors.New("file ends early")
	ErrUnknownTensorType  = errors.New("unknown ggml tensor type")
	ErrCorrupt            = errors.New("corrupt GGUF")
)

// FormatError is a GGUF read failure at a place in a file.
type FormatError struct {
	File   string
	Offset int64
	Field  string
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: offset %d: %s: %v", e.File, e.Offset, e.Field, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// ValueType is the type tag of a GGUF metadata value.
type ValueType uint32

// GGUF metadata value types, as numbered by the GGUF specification.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

// KV is one metadata entry. Value holds uint8 … float64, bool, string, or for
// arrays a typed slice ([]uint32, []string, []any for nested arrays …).
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// TensorInfo is one entry of the tensor directory. Dims are in ggml order
// (ne[0] first, the contiguous dimension).
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64 // from the start of the data section
}

// Elements is the product of the dimensions.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the tensor's storage size in the file.
func (t TensorInfo) Bytes() uint64 {
	b, _ := t.Type.RowBytes(t.Elements())
	return b
}

// File is the parsed header of a GGUF model file; tensor data is not read.
type File struct {
	Path       string
	Size       int64
	Version    uint32
	Metadata   []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset int64 // start of the tensor data section
}

const ggufMagic = 0x46554747 // "GGUF" little-endian

// maxDims is ggml's GGML_MAX_DIMS; maxElements bounds a tensor far above any
// real model so that size arithmetic cannot overflow.
const (
	maxDims     = 4
	maxElements = 1 << 42
)

// Open reads the header of the GGUF file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: open model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: stat %s: %w", path, err)
	}
	return Read(f, st.Size(), path)
}

// Read parses a GGUF header from r, which holds size bytes; name is used in
// errors. Every length is checked against the bytes left, so a corrupt count
// fails fast instead of allocating.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(size, 1<<20))+16), size: size, name: name}
	f := &File{Path: name, Size: size, Alignment: 32}
	if d.u32("magic") != ggufMagic && d.err == nil {
		return nil, d.fail(0, "magic", ErrNotGGUF)
	}
	f.Version = d.u32("version")
	if d.err == nil && f.Version != 2 && f.Version != 3 {
		return nil, d.fail(4, "version", fmt.Errorf("%w: got %d", ErrUnsupportedVersion, f.Version))
	}
	nTensors := d.u64("tensor_count")
	nKV := d.u64("metadata_kv_count")
	if d.err != nil {
		return nil, d.err
	}
	// Counts beyond 2^32 cannot be honest; smaller ones that overrun the file
	// are caught as truncation by the reads below. The smallest KV is 13 bytes
	// and the smallest tensor info 24, which bounds the preallocation.
	if nKV > 1<<32 {
		return nil, d.fail(16, "metadata_kv_count", fmt.Errorf("%w: %d entries", ErrCorrupt, nKV))
	}
	if nTensors > 1<<32 {
		return nil, d.fail(8, "tensor_count", fmt.Errorf("%w: %d tensors", ErrCorrupt, nTensors))
	}
	f.Metadata = make([]KV, 0, min(nKV, uint64(size)/13))
	for i := uint64(0); i < nKV && d.err == nil; i++ {
		at := d.off
		key := d.str(fmt.Sprintf("metadata[%d].key", i))
		vt := ValueType(d.u32(fmt.Sprintf("metadata[%d=%q].type", i, key)))
		v := d.value(vt, key, 0)
		if d.err != nil {
			break
		}
		if key == "general.alignment" {
			a, ok := AsUint(v)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, d.fail(at, "general.alignment", fmt.Errorf("%w: %v is not a power of two", ErrCorrupt, v))
			}
			f.Alignment = a
		}
		f.Metadata = append(f.Metadata, KV{Key: key, Type: vt, Value: v})
	}
	if d.err != nil {
		return nil, d.err
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, uint64(size)/24))
	for i := uint64(0); i < nTensors && d.err == nil; i++ {
		t, err := d.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if d.err != nil {
			break
		}
		f.Tensors = append(f.Tensors, t)
	}
	if d.err != nil {
		return nil, d.err
	}
	f.DataOffset = int64(alignUp(uint64(d.off), f.Alignment))
	for i, t := range f.Tensors {
		end := uint64(f.DataOffset) + t.Offset + t.Bytes()
		if t.Offset > uint64(size) || end > uint64(size) {
			return nil, d.fail(f.DataOffset, fmt.Sprintf("tensors[%d=%q] data", i, t.Name),
				fmt.Errorf("%w: tensor data ends at byte %d but the file has %d bytes (incomplete download?)", ErrTruncated, end, size))
		}
	}
	return f, nil
}

// tensorInfo reads the info of tensor i and checks its dimensions, type and
// offset (aligned to alignment). A read that fails leaves d.err set and the
// error nil: the caller stops there.
func (d *decoder) tensorInfo(i, alignment uint64) (TensorInfo, error) {
	at := d.off
	var t TensorInfo
	t.Name = d.str(fmt.Sprintf("tensors[%d].name", i))
	nd := d.u32(fmt.Sprintf("tensors[%d=%q].n_dims", i, t.Name))
	if d.err == nil && (nd == 0 || nd > maxDims) {
		return t, d.fail(at, fmt.Sprintf("tensors[%d=%q].n_dims", i, t.Name), fmt.Errorf("%w: %d dimensions (ggml allows 1..%d)", ErrCorrupt, nd, maxDims))
	}
	elems := uint64(1)
	for j := uint32(0); j < nd && d.err == nil; j++ {
		dim := d.u64(fmt.Sprintf("tensors[%d=%q].dims[%d]", i, t.Name, j))
		hi, lo := bits.Mul64(elems, dim)
		if d.err == nil && (dim == 0 || hi != 0 || lo > maxElements) {
			return t, d.fail(at, fmt.Sprintf("tensors[%d=%q].dims[%d]", i, t.Name, j), fmt.Errorf("%w: dimension %d (zero, or more than 2^42 elements in all)", ErrCorrupt, dim))
		}
		elems = lo
		t.Dims = append(t.Dims, dim)
	}
	typeAt := d.off
	t.Type = GGMLType(d.u32(fmt.Sprintf("tensors[%d=%q].type", i, t.Name)))
	t.Offset = d.u64(fmt.Sprintf("tensors[%d=%q].offset", i, t.Name))
	if d.err != nil {
		return t, nil
	}
	if !t.Type.Known() {
		return t, d.fail(typeAt, fmt.Sprintf("tensors[%d=%q].type", i, t.Name), fmt.Errorf("%w %d (rig knows the ggml types up to MXFP4=39; update rig for newer files)", ErrUnknownTensorType, uint32(t.Type)))
	}
	if _, err := t.Type.RowBytes(t.Dims[0]); err != nil {
		return t, d.fail(at, fmt.Sprintf("tensors[%d=%q].dims[0]", i, t.Name), fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	if t.Offset%alignment != 0 {
		return t, d.fail(at, fmt.Sprintf("tensors[%d=%q].offset", i, t.Name), fmt.Errorf("%w: offset %d is not aligned to %d", ErrCorrupt, t.Offset, alignment))
	}
	return t, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// Get returns the value stored under key.
func (f *File) Get(key string) (any, bool) {
	for _, kv := range f.Metadata {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Uint returns an integer value under key, whatever its integer width.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return AsUint(v)
}

// String returns a string value under key.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// Architecture is general.architecture ("llama", "gemma3", …).
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// ContextLength is the trained context, <architecture>.context_length; ok is
// false when the file does not say.
func (f *File) ContextLength() (n uint64, ok bool) {
	return f.Uint(f.Architecture() + ".context_length")
}

// TensorBytes is the total storage of all tensors.
func (f *File) TensorBytes() uint64 {
	var n uint64
	for _, t := range f.Tensors {
		n += t.Bytes()
	}
	return n
}

// AsUint is a metadata value of any integer width as a uint64; ok is false
// for a negative or non-integer value.
func AsUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// decoder reads little-endian GGUF fields and remembers the first error.
type decoder struct {
	r    *bufio.Reader
	size int64
	off  int64
	name string
	err  error
	buf  [8]byte
}

func (d *decoder) fail(off int64, field string, err error) error {
	if d.err == nil {
		d.err = &FormatError{File: d.name, Offset: off, Field: field, Err: err}
	}
	return d.err
}

func (d *decoder) read(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	var b []byte
	if n <= len(d.buf) {
		b = d.buf[:n]
	} else {
		b = make([]byte, n)
	}
	got, err := io.ReadFull(d.r, b)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: need %d bytes, %d left", ErrTruncated, n, d.size-d.off)
		}
		d.fail(d.off, field, err)
		return nil
	}
	d.off += int64(n)
	return b
}

func (d *decoder) u32(field string) uint32 {
	b := d.read(4, field)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (d *decoder) u64(field string) uint64 {
	b := d.read(8, field)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (d *decoder) str(field string) string {
	at := d.off
	n := d.u64(field + ".length")
	if d.err != nil {
		return ""
	}
	if n > uint64(d.size-d.off) {
		d.fail(at, field, fmt.Errorf("%w: string of %d bytes, %d left", ErrTruncated, n, d.size-d.off))
		return ""
	}
	b := d.read(int(n), field)
	return string(b)
}

// elemSize is the encoded size of a scalar, or 0 for strings and arrays.
func elemSize(t ValueType) int64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

const maxArrayNesting = 8

func (d *decoder) value(t ValueType, key string, depth int) any {
	field := key
	at := d.off
	switch t {
	case ValueUint8:
		b := d.read(1, field)
		if b == nil {
			return nil
		}
		return b[0]
	case ValueInt8:
		b := d.read(1, field)
		if b == nil {
			return nil
		}
		return int8(b[0])
	case ValueBool:
		b := d.read(1, field)
		if b == nil {
			return nil
		}
		if b[0] > 1 {
			d.fail(at, field, fmt.Errorf("%w: bool byte %d", ErrCorrupt, b[0]))
			return nil
		}
		return b[0] == 1
	case ValueUint16, ValueInt16:
		b := d.read(2, field)
		if b == nil {
			return nil
		}
		v := binary.LittleEndian.Uint16(b)
		if t == ValueInt16 {
			return int16(v)
		}
		return v
	case ValueUint32:
		return d.u32(field)
	case ValueInt32:
		return int32(d.u32(field))
	case ValueFloat32:
		return math.Float32frombits(d.u32(field))
	case ValueUint64:
		return d.u64(field)
	case ValueInt64:
		return int64(d.u64(field))
	case ValueFloat64:
		return math.Float64frombits(d.u64(field))
	case ValueString:
		return d.str(field)
	case ValueArray:
		if depth >= maxArrayNesting {
			d.fail(at, field, fmt.Errorf("%w: arrays nested deeper than %d", ErrCorrupt, maxArrayNesting))
			return nil
		}
		et := ValueType(d.u32(field + ".array_type"))
		n := d.u64(field + ".array_length")
		if d.err != nil {
			return nil
		}
		min := elemSize(et)
		if min == 0 {
			min = 8 // a string or nested array header
		}
		if et > ValueFloat64 {
			d.fail(at, field, fmt.Errorf("%w: array element type %d", ErrCorrupt, et))
			return nil
		}
		if n > uint64(d.size-d.off)/uint64(min) {
			d.fail(at, field, fmt.Errorf("%w: array of %d elements, %d bytes left", ErrTruncated, n, d.size-d.off))
			return nil
		}
		return d.array(et, int(n), key, depth)
	}
	d.fail(at, field+".type", fmt.Errorf("%w: metadata value type %d", ErrCorrupt, t))
	return nil
}

func (d *decoder) array(et ValueType, n int, key string, depth int) any {
	switch et {
	case ValueString:
		out := make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.str(key))
		}
		return out
	case ValueFloat32:
		out := make([]float32, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, math.Float32frombits(d.u32(key)))
		}
		return out
	case ValueInt32:
		out := make([]int32, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, int32(d.u32(key)))
		}
		return out
	case ValueUint32:
		out := make([]uint32, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.u32(key))
		}
		return out
	}
	out := make([]any, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.value(et, key, depth+1))
	}
	return out
}
