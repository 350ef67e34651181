package studies

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// DefaultBatchSize is how many tasks of a job kind one block holds.
const DefaultBatchSize = 8

// TrialKey names one trial: arm × job kind × task × repeat. It is the unit
// a receipt is unique on; attempts of the same key are reruns of it.
type TrialKey struct {
	Arm     string `json:"arm"`
	JobKind string `json:"job_kind"`
	Task    string `json:"task"`
	Repeat  int    `json:"repeat"` // 1-based
}

// String is "arm/jobkind/task/repeat".
func (k TrialKey) String() string {
	return k.Arm + "/" + k.JobKind + "/" + k.Task + "/" + strconv.Itoa(k.Repeat)
}

// CallID is the call id the generation row of the key's attempt carries:
// "arm/jobkind/task/repeat#attempt". A receipt names its row by it.
func (k TrialKey) CallID(attempt int) string {
	return k.String() + "#" + strconv.Itoa(attempt)
}

// ParseTrialKey reads String's form; the task id may itself contain '/'.
func ParseTrialKey(s string) (TrialKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 4 {
		return TrialKey{}, fmt.Errorf("trial key %q: want arm/jobkind/task/repeat", s)
	}
	rep, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil || rep < 1 {
		return TrialKey{}, fmt.Errorf("trial key %q: repeat %q is not a positive number", s, parts[len(parts)-1])
	}
	task := strings.Join(parts[2:len(parts)-1], "/")
	if parts[0] == "" || parts[1] == "" || task == "" {
		return TrialKey{}, fmt.Errorf("trial key %q: empty part", s)
	}
	return TrialKey{Arm: parts[0], JobKind: parts[1], Task: task, Repeat: rep}, nil
}

// Trial is one planned trial in execution order.
type Trial struct {
	Key   TrialKey `json:"key"`
	Block int      `json:"block"`
	// Instance names the runtime process that serves the trial (server,
	// model, context). Consecutive trials with the same instance share one
	// model load.
	Instance string `json:"instance"`
}

// Plan is the recorded order of an execution's trials.
type Plan struct {
	Seed      int64   `json:"seed"`
	BatchSize int     `json:"batch_size"`
	Blocks    int     `json:"blocks"`
	Loads     int     `json:"loads"` // instance switches, the first load included
	Trials    []Trial `json:"trials"`
	Hash      string  `json:"hash"`
}

// PlanOptions tunes NewPlan.
type PlanOptions struct {
	Seed int64
	// BatchSize is the tasks per block; 0 means DefaultBatchSize. Larger
	// batches mean fewer model loads and a coarser spread of drift.
	BatchSize int
}

// ErrEmptyPlan is a design and task set that produce no trials.
var ErrEmptyPlan = errors.New("plan has no trials")

// NewPlan lays out every arm × task × repeat in randomized blocks. A block
// is one batch of a job kind's tasks at one repeat; inside it the arms come
// in a fresh random order, each running the whole batch before the next arm
// starts. So every arm meets every stretch of the run (time drift — heat,
// clocks, background load — spreads across arms instead of landing on
// whichever ran last) while each block costs at most one model load per
// arm. The trade-off is the batch size: a batch of one interleaves finest
// and loads a model for nearly every trial; a batch of the whole bank loads
// least and balances drift only across repeats. Blocks of different job
// kinds alternate. The seed and the resulting hash are recorded, so the same
// seed always gives the same plan (resume depends on it).
func NewPlan(d *Design, tasks map[string][]string, opts PlanOptions) (*Plan, error) {
	bs := opts.BatchSize
	if bs == 0 {
		bs = DefaultBatchSize
	}
	if bs < 1 {
		return nil, fmt.Errorf("batch size %d: want 1 or more", bs)
	}
	if d.Repeats < 1 {
		return nil, fmt.Errorf("repeats %d: want 1 or more", d.Repeats)
	}
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 0x7269672d706c616e)) // "rig-plan"
	p := &Plan{Seed: opts.Seed, BatchSize: bs}
	for r := 1; r <= d.Repeats; r++ {
		// Each repeat reshuffles the tasks, so batches differ between
		// repeats and no task is always first or last.
		batches := make([][][]string, len(d.JobKinds))
		most := 0
		for j, jk := range d.JobKinds {
			ts := append([]string(nil), tasks[jk.Name]...)
			rng.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
			for i := 0; i < len(ts); i += bs {
				batches[j] = append(batches[j], ts[i:min(i+bs, len(ts))])
			}
			most = max(most, len(batches[j]))
		}
		for b := range most {
			for j, jk := range d.JobKinds {
				if b >= len(batches[j]) {
					continue
				}
				arms := d.ArmsFor(jk.Name)
				if len(arms) == 0 {
					continue
				}
				rng.Shuffle(len(arms), func(a, c int) { arms[a], arms[c] = arms[c], arms[a] })
				for _, ai := range arms {
					a := &d.Arms[ai]
					inst := instance(a)
					for _, task := range batches[j][b] {
						p.Trials = append(p.Trials, Trial{
							Key:      TrialKey{Arm: a.Name, JobKind: jk.Name, Task: task, Repeat: r},
							Block:    p.Blocks,
							Instance: inst,
						})
					}
				}
				p.Blocks++
			}
		}
	}
	if len(p.Trials) == 0 {
		return nil, fmt.Errorf("%w: no job kind has both tasks and arms", ErrEmptyPlan)
	}
	seen := make(map[TrialKey]bool, len(p.Trials))
	prev := ""
	for _, t := range p.Trials {
		if seen[t.Key] {
			return nil, fmt.Errorf("task %q appears twice in job kind %q's bank (task ids must be unique)", t.Key.Task, t.Key.JobKind)
		}
		seen[t.Key] = true
		if t.Instance != prev {
			p.Loads++
			prev = t.Instance
		}
	}
	h, err := Hash(struct {
		Seed      int64   `json:"seed"`
		BatchSize int     `json:"batch_size"`
		Trials    []Trial `json:"trials"`
	}{p.Seed, p.BatchSize, p.Trials})
	if err != nil {
		return nil, err
	}
	p.Hash = h
	return p, nil
}

// instance names the runtime process an arm's trials need; Aider runs per
// task, so the server behind it is what a load costs.
func instance(a *Arm) string {
	server := a.Runtime.Engine()
	inst := fmt.Sprintf("%s|%s|%s|ctx=%d", server, a.Model.File, a.Pins.Quant, a.Pins.Context)
	if n := a.Pins.SlotCount(); n > 1 {
		// Another slot count is another process; one slot keeps the
		// instance, and so the plan's hash, as it was.
		inst += fmt.Sprintf("|slots=%d", n)
	}
	return inst
}

// PlanSeed derives an execution's plan seed from the snapshot and attempt,
// so a resumed execution rebuilds exactly the plan it started with and each
// attempt still gets its own order.
func PlanSeed(snapshotHash string, attempt int) int64 {
	sum := sha256.Sum256([]byte(snapshotHash + "/" + strconv.Itoa(attempt)))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 1)
}
