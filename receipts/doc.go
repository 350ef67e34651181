// Package receipts is a study's own store: one bbolt file per study holding the
// receipt of every trial in a shared, versioned schema, with the executions,
// preflight verdicts, governor events, audit log and idempotency keys that go
// with them. It refuses writes from another study, keeps a trial from being
// scored twice, checks its own integrity, and exports receipts as JSONL or CSV
// so a later study can reuse them. It does not plan, run or grade trials, and it
// does not decide which state transitions are legal; the studies package does.
package receipts
