package preflight

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Size is a memory size in bytes. It reads and prints with binary units
// ("8GiB", "512MiB"); JSON carries the text form so files stay readable.
type Size uint64

// Binary units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// MaxSize is the largest memory size rig accepts; larger is a typo.
const MaxSize = TiB

// ErrBadSize marks a size that is malformed, not positive or absurd.
var ErrBadSize = errors.New("bad memory size")

// ParseSize reads "8GiB", "512MiB", "1.5GiB", "4096" (bytes), and the decimal
// units "8GB", "500MB" (powers of ten). Zero, negative and sizes above 1 TiB
// are errors.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%w: %q: unit %q is not one of B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)", ErrBadSize, s, t[i:])
	}
	if strings.HasPrefix(num, "-") || strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%w: %q is negative (give a positive size such as 8GiB)", ErrBadSize, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%w: %q is not a number followed by a unit (for example 8GiB or 512MiB)", ErrBadSize, s)
	}
	b := v * mult
	switch {
	case b < 1:
		return 0, fmt.Errorf("%w: %q is zero (give a positive size such as 8GiB)", ErrBadSize, s)
	case b > float64(MaxSize):
		return 0, fmt.Errorf("%w: %q is more than 1TiB, which no card or host here has (check the unit)", ErrBadSize, s)
	}
	return Size(b), nil
}

// String prints the size with the largest binary unit that keeps it readable.
func (s Size) String() string {
	switch {
	case s >= GiB:
		return trimFloat(float64(s)/float64(GiB)) + "GiB"
	case s >= MiB:
		return trimFloat(float64(s)/float64(MiB)) + "MiB"
	case s >= KiB:
		return trimFloat(float64(s)/float64(KiB)) + "KiB"
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// MiBf is the size in MiB, for tables.
func (s Size) MiBf() float64 { return float64(s) / float64(MiB) }

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(f, 'f', 2, 64), "0"), ".")
}

// MarshalText writes the exact byte count when the readable form would round.
func (s Size) MarshalText() ([]byte, error) {
	if p, err := ParseSize(s.String()); err == nil && p == s {
		return []byte(s.String()), nil
	}
	return []byte(strconv.FormatUint(uint64(s), 10)), nil
}

// UnmarshalText takes a plain byte count (zero included, for measured
// values) or anything ParseSize reads; profiles check positivity themselves.
func (s *Size) UnmarshalText(b []byte) error {
	if n, err := strconv.ParseUint(string(b), 10, 64); err == nil && n <= uint64(MaxSize) {
		*s = Size(n)
		return nil
	}
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
