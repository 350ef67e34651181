package preflight

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// ErrOverflow marks memory arithmetic whose result does not fit 64 bits: a
// wrapped-around product would make a cache look small and a model "fit".
var ErrOverflow = errors.New("memory arithmetic overflows")

// checked does unsigned 64-bit arithmetic that remembers the first overflow
// instead of wrapping; after one, every result is 0 and err says which.
type checked struct{ err error }

func (c *checked) mul(a ...uint64) uint64 {
	r := uint64(1)
	for _, x := range a {
		hi, lo := bits.Mul64(r, x)
		if hi != 0 && c.err == nil {
			c.err = fmt.Errorf("%w: %d × %d", ErrOverflow, r, x)
		}
		r = lo
	}
	if c.err != nil {
		return 0
	}
	return r
}

func (c *checked) add(a ...uint64) uint64 {
	var r uint64
	for _, x := range a {
		s, carry := bits.Add64(r, x, 0)
		if carry != 0 && c.err == nil {
			c.err = fmt.Errorf("%w: %d + %d", ErrOverflow, r, x)
		}
		r = s
	}
	if c.err != nil {
		return 0
	}
	return r
}

// int converts a non-negative int (a bounded count) to uint64.
func (c *checked) int(n int) uint64 {
	if n < 0 {
		if c.err == nil {
			c.err = fmt.Errorf("%w: negative count %d", ErrOverflow, n)
		}
		return 0
	}
	return uint64(n)
}

// float converts a byte count computed in floating point (calibrated
// constants are fractional), rounding down; NaN, infinities, negatives and
// values of 2^63 or more are errors, since Go's conversion of those is not
// defined.
func (c *checked) float(x float64) uint64 {
	if math.IsNaN(x) || x < 0 || x >= math.MaxInt64 {
		if c.err == nil {
			c.err = fmt.Errorf("%w: %g bytes", ErrOverflow, x)
		}
		return 0
	}
	if c.err != nil {
		return 0
	}
	return uint64(x)
}

// padUp rounds n up to a multiple of p.
func (c *checked) padUp(n, p uint64) uint64 {
	if p <= 1 {
		return n
	}
	return c.mul(c.add(n, p-1)/p, p)
}
