// Package replay shows that a kept output is genuine: it re-scores a
// generation record's rows through the pinned model (replay), measures how
// far genuine replays drift and how far edited or forged rows fall
// (calibrate, tolerance), and prices a replay against generating again
// (bench). It starts runtimes through runtimes and reads records through
// genrecord; it does not run studies, and it writes no receipts.
package replay
