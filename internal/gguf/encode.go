package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Tensor is a tensor to encode: its directory entry (Offset is assigned by
// Encode) and its raw bytes in the entry's type.
type Tensor struct {
	Info TensorInfo
	Data []byte
}

// Encode writes a GGUF version 3 file with the given metadata and tensors,
// aligning tensor data to general.alignment (32 when absent). It exists for
// test fixtures and the tiny-model generator, not for converting models.
func Encode(w io.Writer, meta []KV, tensors []Tensor) error {
	align := uint64(32)
	for _, kv := range meta {
		if kv.Key == "general.alignment" {
			if a, ok := AsUint(kv.Value); ok && a > 0 {
				align = a
			}
		}
	}
	bw := bufio.NewWriter(w)
	e := &encoder{w: bw}
	e.u32(ggufMagic)
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, kv := range meta {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		e.value(kv.Type, kv.Value)
	}
	var off uint64
	for _, t := range tensors {
		want := t.Info.Bytes()
		if uint64(len(t.Data)) != want {
			return fmt.Errorf("gguf: encode tensor %q: %d data bytes, its type and dims need %d", t.Info.Name, len(t.Data), want)
		}
		e.str(t.Info.Name)
		e.u32(uint32(len(t.Info.Dims)))
		for _, d := range t.Info.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Info.Type))
		e.u64(off)
		off = alignUp(off+want, align)
	}
	e.pad(align)
	for i, t := range tensors {
		e.write(t.Data)
		if i < len(tensors)-1 {
			e.pad(align)
		}
	}
	if e.err != nil {
		return fmt.Errorf("gguf: encode: %w", e.err)
	}
	return bw.Flush()
}

type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += uint64(n)
	e.err = err
}

func (e *encoder) pad(align uint64) {
	if r := e.n % align; r != 0 {
		e.write(make([]byte, align-r))
	}
}

func (e *encoder) u32(v uint32) { e.write(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.write(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.write([]byte(s)) }

func (e *encoder) value(t ValueType, v any) {
	switch t {
	case ValueUint8:
		e.write([]byte{v.(uint8)})
	case ValueInt8:
		e.write([]byte{byte(v.(int8))})
	case ValueBool:
		if v.(bool) {
			e.write([]byte{1})
		} else {
			e.write([]byte{0})
		}
	case ValueUint16:
		e.write(binary.LittleEndian.AppendUint16(nil, v.(uint16)))
	case ValueInt16:
		e.write(binary.LittleEndian.AppendUint16(nil, uint16(v.(int16))))
	case ValueUint32:
		e.u32(v.(uint32))
	case ValueInt32:
		e.u32(uint32(v.(int32)))
	case ValueFloat32:
		e.u32(math.Float32bits(v.(float32)))
	case ValueUint64:
		e.u64(v.(uint64))
	case ValueInt64:
		e.u64(uint64(v.(int64)))
	case ValueFloat64:
		e.u64(math.Float64bits(v.(float64)))
	case ValueString:
		e.str(v.(string))
	case ValueArray:
		switch a := v.(type) {
		case []string:
			e.u32(uint32(ValueString))
			e.u64(uint64(len(a)))
			for _, s := range a {
				e.str(s)
			}
		case []float32:
			e.u32(uint32(ValueFloat32))
			e.u64(uint64(len(a)))
			for _, f := range a {
				e.u32(math.Float32bits(f))
			}
		case []int32:
			e.u32(uint32(ValueInt32))
			e.u64(uint64(len(a)))
			for _, x := range a {
				e.u32(uint32(x))
			}
		case []uint32:
			e.u32(uint32(ValueUint32))
			e.u64(uint64(len(a)))
			for _, x := range a {
				e.u32(x)
			}
		default:
			e.err = fmt.Errorf("array value of Go type %T is not supported", v)
		}
	default:
		e.err = fmt.Errorf("metadata value type %d is not supported", t)
	}
}
