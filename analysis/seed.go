package analysis

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// SeedFrom says in words how SeedForDesign derives the seed; reports print
// it beside the seed so a reader can check it against the design hash.
const SeedFrom = "the first 8 bytes of the design hash, big-endian"

// SeedForDesign is the analysis seed of a frozen design: the first 8 bytes of
// its hash (hex SHA-256), big-endian, so every design has its own resampling
// streams and the same design always gets the same numbers. A hash that is
// not hex (never a frozen design's) is hashed first.
func SeedForDesign(designHash string) uint64 {
	b, err := hex.DecodeString(designHash)
	if err != nil || len(b) < 8 {
		sum := sha256.Sum256([]byte(designHash))
		b = sum[:]
	}
	return binary.BigEndian.Uint64(b[:8])
}
