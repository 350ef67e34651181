package studies

import (
	"fmt"

	"rig/internal/sizecap"
)

// DesignCap is the most bytes a design file may hold. A design is
// kilobytes (the demo's is about 4 KiB); a file in the megabytes is a
// prompt or a bank pasted in by mistake, or a file meant to cost the
// daemon memory. The command line and the daemon both refuse it before
// parsing.
var DesignCap = sizecap.Cap{
	What:  "study design",
	Limit: 8 << 20,
	Fix:   "a design is a few kilobytes: keep prompts in the task bank and long notes out of the design",
}

// ReadDesignFile reads a design file under DesignCap.
func ReadDesignFile(path string) ([]byte, error) {
	return DesignCap.ReadFile(path)
}

// countProblems checks the lengths of the design's lists against their
// bounds on the decoded JSON tree, as the first thing after decoding: an
// over-long list is refused before any work per item (checking each item's
// shape and keys, expanding card profiles, reading each arm's model
// header), so a design with 10,000 arms costs about what one with 65 does.
func countProblems(file string, tree any) []Problem {
	top, _ := tree.(map[string]any)
	var probs []Problem
	over := func(key string, limit int, format string) {
		if list, ok := top[key].([]any); ok && len(list) > limit {
			probs = append(probs, Problem{File: file, Path: key, Kind: KindInvalid, Msg: fmt.Sprintf(format, len(list), limit)})
		}
	}
	over("arms", MaxArms, "%d arms: at most %d (screen the candidates in several studies, each against the incumbent)")
	over("job_kinds", MaxJobKinds, "%d job kinds: at most %d (split the decisions into several studies)")
	over("card_profiles", MaxCardProfiles, "%d step-down profiles: at most %d (each multiplies every arm; measure the rest in another card sub-study)")
	return probs
}
