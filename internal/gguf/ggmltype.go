package gguf

import (
	"fmt"
	"strings"
)

// GGMLType is a tensor element encoding as numbered in ggml.h.
type GGMLType uint32

// The ggml tensor types. Gaps in the numbering are types that ggml removed;
// files that use them are rejected as unknown.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
)

// typeTrait is the storage layout of one type: BlockSize elements are stored
// in TypeSize bytes.
type typeTrait struct {
	Name      string
	BlockSize uint64
	TypeSize  uint64
}

// typeTraits mirrors ggml's type_traits table (block sizes from ggml-common.h).
func typeTraits(t GGMLType) (typeTrait, bool) {
	switch t {
	case TypeF32:
		return typeTrait{"F32", 1, 4}, true
	case TypeF16:
		return typeTrait{"F16", 1, 2}, true
	case TypeQ4_0:
		return typeTrait{"Q4_0", 32, 18}, true
	case TypeQ4_1:
		return typeTrait{"Q4_1", 32, 20}, true
	case TypeQ5_0:
		return typeTrait{"Q5_0", 32, 22}, true
	case TypeQ5_1:
		return typeTrait{"Q5_1", 32, 24}, true
	case TypeQ8_0:
		return typeTrait{"Q8_0", 32, 34}, true
	case TypeQ8_1:
		return typeTrait{"Q8_1", 32, 36}, true
	case TypeQ2_K:
		return typeTrait{"Q2_K", 256, 84}, true
	case TypeQ3_K:
		return typeTrait{"Q3_K", 256, 110}, true
	case TypeQ4_K:
		return typeTrait{"Q4_K", 256, 144}, true
	case TypeQ5_K:
		return typeTrait{"Q5_K", 256, 176}, true
	case TypeQ6_K:
		return typeTrait{"Q6_K", 256, 210}, true
	case TypeQ8_K:
		return typeTrait{"Q8_K", 256, 292}, true
	case TypeIQ2_XXS:
		return typeTrait{"IQ2_XXS", 256, 66}, true
	case TypeIQ2_XS:
		return typeTrait{"IQ2_XS", 256, 74}, true
	case TypeIQ3_XXS:
		return typeTrait{"IQ3_XXS", 256, 98}, true
	case TypeIQ1_S:
		return typeTrait{"IQ1_S", 256, 50}, true
	case TypeIQ4_NL:
		return typeTrait{"IQ4_NL", 32, 18}, true
	case TypeIQ3_S:
		return typeTrait{"IQ3_S", 256, 110}, true
	case TypeIQ2_S:
		return typeTrait{"IQ2_S", 256, 82}, true
	case TypeIQ4_XS:
		return typeTrait{"IQ4_XS", 256, 136}, true
	case TypeI8:
		return typeTrait{"I8", 1, 1}, true
	case TypeI16:
		return typeTrait{"I16", 1, 2}, true
	case TypeI32:
		return typeTrait{"I32", 1, 4}, true
	case TypeI64:
		return typeTrait{"I64", 1, 8}, true
	case TypeF64:
		return typeTrait{"F64", 1, 8}, true
	case TypeIQ1_M:
		return typeTrait{"IQ1_M", 256, 56}, true
	case TypeBF16:
		return typeTrait{"BF16", 1, 2}, true
	case TypeTQ1_0:
		return typeTrait{"TQ1_0", 256, 54}, true
	case TypeTQ2_0:
		return typeTrait{"TQ2_0", 256, 66}, true
	case TypeMXFP4:
		return typeTrait{"MXFP4", 32, 17}, true
	}
	return typeTrait{}, false
}

// Known reports whether rig knows the storage layout of t.
func (t GGMLType) Known() bool {
	_, ok := typeTraits(t)
	return ok
}

// BlockSize is the number of elements stored together in one block.
func (t GGMLType) BlockSize() uint64 {
	tr, _ := typeTraits(t)
	return tr.BlockSize
}

// TypeSize is the number of bytes one block takes.
func (t GGMLType) TypeSize() uint64 {
	tr, _ := typeTraits(t)
	return tr.TypeSize
}

// RowBytes is the storage of n elements of this type, or an error when n is
// not a whole number of blocks (ggml cannot store such a row).
func (t GGMLType) RowBytes(n uint64) (uint64, error) {
	tr, ok := typeTraits(t)
	if !ok {
		return 0, fmt.Errorf("ggml type %d: %w", uint32(t), ErrUnknownTensorType)
	}
	if n%tr.BlockSize != 0 {
		return 0, fmt.Errorf("ggml type %s: %d elements is not a multiple of the block size %d", tr.Name, n, tr.BlockSize)
	}
	return n / tr.BlockSize * tr.TypeSize, nil
}

// BytesPerElement is the average storage per element, used for KV-cache sizing.
func (t GGMLType) BytesPerElement() float64 {
	tr, ok := typeTraits(t)
	if !ok {
		return 0
	}
	return float64(tr.TypeSize) / float64(tr.BlockSize)
}

func (t GGMLType) String() string {
	if tr, ok := typeTraits(t); ok {
		return tr.Name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// ParseGGMLType maps a name such as "q8_0" or "F16" to its type.
func ParseGGMLType(name string) (GGMLType, error) {
	for t := GGMLType(0); t <= TypeMXFP4; t++ {
		if tr, ok := typeTraits(t); ok && strings.EqualFold(tr.Name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("ggml type %q: %w", name, ErrUnknownTensorType)
}
