package scaleout

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"rig/studies"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func shortHash(s string) string { return sha256Hex([]byte(s))[:12] }

var unsafeQueue = regexp.MustCompile(`[^a-z0-9._-]+`)

// Queue is the task queue of trials that need this runtime build on this
// card class: a trial and, later, its replay land on the same stack.
func Queue(runtime, binarySHA256, cardClass string) string {
	b := binarySHA256
	if len(b) > 16 {
		b = b[:16]
	}
	return "rig.trials." + runtime + "." + b + "." + cardClass
}

// CardClass turns a card's name into a queue-name element: "cpu" for no
// card, else the GPU's name in lower case.
func CardClass(gpu string) string {
	if strings.TrimSpace(gpu) == "" {
		return "cpu"
	}
	return strings.Trim(unsafeQueue.ReplaceAllString(strings.ToLower(gpu), "-"), "-")
}

// ArmCardClass is the card class an arm's trials need.
func ArmCardClass(d *studies.Design, a studies.Arm) string {
	return CardClass(studies.CardOf(d, a).GPU)
}
