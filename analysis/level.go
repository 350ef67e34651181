package analysis

import "fmt"

// LevelPercent words a confidence level as a percentage with the precision
// it has: 0.95 is "95%", 1 − 0.05/2 is "97.5%" and 1 − 0.05/3 is "98.33%".
// A level rounded to a whole percent ("98%" for 97.5%) claims a coverage
// the interval does not have, so every place that prints a level uses this.
// Four significant figures also absorb the float error of 100·level
// (97.49999999999999).
func LevelPercent(level float64) string {
	return fmt.Sprintf("%.4g%%", 100*level)
}
