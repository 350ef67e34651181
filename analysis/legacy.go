package analysis

import (
	"encoding/json"
	"fmt"
	"reflect"

	"rig/internal/jsonkeys"
)

// legacyNames are the JSON names analysis's fields had before they moved
// to snake_case (issue #44), each the camelCase of its snake_case name
// (jsonkeys.Snake). They are kept for two readers:
//   - ComparisonHash hashes the canonical inputs under them, so that the
//     bytes it hashes, and every hash a decision recorded, stay as they were;
//   - a stored record written before the move (an execution's early-stopping
//     record, Sequential) reads through them.
//
// The list is frozen: a field added later has its snake_case name only, and
// is hashed under it (a field the hash reads must be omitted while zero, or
// every hash changes; hash_golden_test.go holds that).
var legacyNames = []string{
	"allowIncomparableJudges", "allowRegressions", "anyHolm", "baselineOnly", "baselineValue", "budgetBlown",
	"calibrationId", "candidateOnly", "candidateValue", "chiSq", "commonTasks", "comparisonHash", "costFactor",
	"costMeasure", "costRatio", "deltaP50Ms", "deltaP95Ms", "designHash", "effectiveN", "energyJoules",
	"energyNote", "energySource", "fixedAnyHolm", "fixedPower", "fixedWinner", "futilityBeta", "futilityBound",
	"futilityE", "genTokS", "higherIsBetter", "holmFamily", "holmP", "intervalMethod", "jobKind", "jobKinds",
	"judgeId", "leaderPBest", "maxAbsolute", "maxCostIncrease", "maxP95LatencyIncrease", "maxRelative",
	"meanEnergyJoules", "meanWallSeconds", "midP", "minDelta", "minDetectable", "minPassRateDelta",
	"missingTasks", "newlyFailing", "newlyFixed", "nextBaseline", "noResult", "nonZero", "notRun", "p50Ms",
	"p95Ms", "pBest", "pBestBar", "pHolm", "passDelta", "passRate", "peakMemory", "peakMemoryBytes",
	"permutationResamples", "pilotDiscordance", "promptTokS", "repeatsPrompt", "signFlip", "smallestDifference",
	"stopCap", "stoppedAt", "stoppedEarly", "tasksMissing", "tiedWith", "totalWallSeconds", "tpotMs", "tpotP50",
	"tpotP50Ms", "tpotP99", "tpotP99Ms", "ttftMs", "ttftP50", "ttftP50Ms", "ttftP99", "ttftP99Ms",
	"wallSeconds", "winnerPolicy",
}

// toLegacy and fromLegacy map between the two spellings of legacyNames;
// a name not in the list maps to itself.
var toLegacy, fromLegacy = func() (map[string]string, map[string]string) {
	to, from := map[string]string{}, map[string]string{}
	for _, l := range legacyNames {
		s := jsonkeys.Snake(l)
		if _, dup := to[s]; dup {
			panic(fmt.Sprintf("analysis: legacy names %q and %q are both %q", to[s], l, s))
		}
		to[s], from[l] = l, s
	}
	return to, from
}()

func legacyName(name string) string {
	if l, ok := toLegacy[name]; ok {
		return l
	}
	return name
}

func currentName(name string) string {
	if s, ok := fromLegacy[name]; ok {
		return s
	}
	return name
}

// UnmarshalJSON reads an early-stopping record in either spelling of its
// field names: one stored before the move to snake_case has the legacy ones.
func (s *Sequential) UnmarshalJSON(b []byte) error {
	b, err := jsonkeys.Rename(b, reflect.TypeFor[Sequential](), currentName)
	if err != nil {
		return err
	}
	type plain Sequential // without this method
	return json.Unmarshal(b, (*plain)(s))
}
