package scaleout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"rig/studies"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func shortHash(s string) string { return sha256Hex([]byte(s))[:12] }

// Queue is the task queue of trials that need this runtime build on this
// card class: a trial and, later, its replay land on the same stack.
func Queue(runtime, binarySHA256, cardClass string) string {
	b := binarySHA256
	if len(b) > 16 {
		b = b[:16]
	}
	return "rig.trials." + runtime + "." + b + "." + cardClass
}

// CardClass is a card's class in queue names: the card's name as NVML
// gives it (or as a design writes it) and its memory, normalized so that
// both sides meet. Lower case; vendor and brand words dropped ("nvidia",
// "geforce", "tesla", "quadro"), and a memory size written in the name
// ("80GB"), since the memory is given apart; every other run of characters
// outside a-z0-9 one "-"; then the memory rounded to whole GiB. So NVML's
// "NVIDIA H200" with 143771 MiB is "h200-140gib", and a design's
// {"gpu": "H200", "memory_mib": 143771} the same. No name is "cpu".
func CardClass(name string, memoryBytes uint64) string {
	var words []string
	for _, w := range nonWord.Split(strings.ToLower(name), -1) {
		if w == "" || vendorWords[w] || sizeWord.MatchString(w) {
			continue
		}
		words = append(words, w)
	}
	if len(words) == 0 {
		return "cpu"
	}
	if gib := (memoryBytes + 1<<29) >> 30; gib > 0 {
		words = append(words, fmt.Sprintf("%dgib", gib))
	}
	return strings.Join(words, "-")
}

var (
	nonWord     = regexp.MustCompile(`[^a-z0-9]+`)
	sizeWord    = regexp.MustCompile(`^[0-9]+(gb|gib|g)$`)
	vendorWords = map[string]bool{"nvidia": true, "geforce": true, "tesla": true, "quadro": true, "amd": true, "radeon": true, "intel": true}
)

// ArmCardClass is the card class an arm's trials need: its card profile's
// GPU and memory through CardClass, as a worker's NVML reading goes. A
// simulated card is a reservation on any machine: its class is the name
// alone, never its reserved size.
func ArmCardClass(d *studies.Design, a studies.Arm) string {
	p := studies.CardOf(d, a)
	var mem uint64
	if !p.Simulated && p.MemoryMiB > 0 {
		mem = uint64(p.MemoryMiB) << 20
	}
	return CardClass(p.GPU, mem)
}
