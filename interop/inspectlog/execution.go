package inspectlog

import (
	"rig/genrecord"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// Execution is the evidence of one execution that its logs are made from,
// as values: Load reads it from a study's folder and the daemon's receipts.
type Execution struct {
	Study      string
	ID         string
	DesignHash string
	Design     *studies.Design
	// Banks are the frozen banks by job kind.
	Banks map[string]Bank
	// Receipts are every attempt of the execution.
	Receipts []receipts.Receipt
	// Rows are each arm's kept calls, by arm, in record order.
	Rows map[string][]genrecord.Row
}

// Bank is a job kind's frozen bank: where it is, its content hash and its
// tasks (for the keys a sample's target shows).
type Bank struct {
	Name  string
	Path  string
	Hash  string
	Tasks map[string]tasks.Task
}
