// Package replay shows that a kept output is genuine: it re-scores a
// generation record's rows through the pinned model (replay), and measures
// how far genuine replays drift and how far edited or forged rows fall
// (calibrate, tolerance). It starts runtimes through runtimes and reads
// records through genrecord; it does not run studies, and it writes no
// receipts. What a replay costs against generating again is `rig bench
// replay` (bench/replaycost), which replays through a Stack.
package replay
