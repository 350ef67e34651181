package metrics

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Worker states, the values of rig_worker_state's state label. Exactly one
// of them is 1 at a time.
const (
	StateIdle    = "idle"    // taking trials, none running
	StateRunning = "running" // a trial is running
	StateHeld    = "held"    // not taking trials: the governor is not ready
)

// WorkerStates are every worker state, in the order they are exported.
var WorkerStates = []string{StateIdle, StateRunning, StateHeld}

// Outcomes a worker records for a trial attempt that ended without a
// receipt; the other outcome values are the receipt's outcome classes.
const (
	OutcomeRefused = "refused" // the worker refused the trial: nothing ran
	OutcomeFailed  = "failed"  // the attempt failed without a receipt (the coordinator records it as lost)
)

// Where the daemon's planned trials run, the values of rig_queue_depth's
// queue label.
const (
	QueueLocal    = "local"    // the daemon's own runner
	QueueTemporal = "temporal" // the scale-out engine
)

// Queues are every value of rig_queue_depth's queue label.
var Queues = []string{QueueLocal, QueueTemporal}

// How a merge of a spool entry ended, the values of
// rig_merge_duration_seconds' result label.
const (
	MergeMerged    = "merged"    // stored
	MergeAlready   = "already"   // the same receipt was stored before
	MergeDivergent = "divergent" // a different receipt for the same attempt, kept apart
	MergeRefused   = "refused"   // the entry does not match what the worker reported, or the plan
	MergeFailed    = "failed"    // to be retried
)

// MergeResults are every merge result, in the order they are exported.
var MergeResults = []string{MergeMerged, MergeAlready, MergeDivergent, MergeRefused, MergeFailed}

// Role is which process a Set is for. Each exports only what it records,
// so that a name means one thing wherever it is scraped (a sum across jobs
// never counts a trial twice) and no series stands at 0 for ever.
type Role int

// The roles.
const (
	// Daemon: receipts stored, the queue's depth, the coordinator's merges.
	Daemon Role = iota + 1
	// Worker: trial attempts, the worker's state.
	Worker
)

func (r Role) String() string {
	switch r {
	case Daemon:
		return "daemon"
	case Worker:
		return "worker"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Known are label values known when a process starts, from packages this
// one does not import (the daemon fills it in). Each value's series exists
// at 0 from the start, beside those of the values this package owns (worker
// states, refused and failed, merge results, queues): a series born at 1
// is no increase to rate() or increase(), so the first preemption after a
// start would go unseen by an alert.
type Known struct {
	Outcomes       []string // the receipt's outcome classes
	GovernorEvents []string // the governor's event kinds
}

// Set is one process's metrics: a registry of its own (no global state)
// and the metrics of its role. The daemon and each worker make one; the
// zero value is not usable, and a nil *Set records nothing, so callers
// that run without metrics need no branches. A Set records what it is told
// whatever its role; what its role does not export is kept unseen.
type Set struct {
	reg *prometheus.Registry

	trialsStarted  *prometheus.CounterVec
	trials         *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	trialDuration  *prometheus.HistogramVec
	attemptSeconds *prometheus.HistogramVec
	inFlight       prometheus.Gauge
	running        atomic.Int64 // inFlight's value, for WorkerState's caller
	queueDepth     *prometheus.GaugeVec
	workerState    *prometheus.GaugeVec
	governorEvents *prometheus.CounterVec
	governorHeld   prometheus.Gauge
	faultPass      prometheus.Gauge
	merge          *prometheus.HistogramVec
	cards          *cardCollector

	depthMu sync.Mutex      // QueueDepths runs under mu (OnScrape) and outside it
	queues  map[string]bool // every queue label rig_queue_depth has had

	mu      sync.Mutex // one refresh and gather at a time
	refresh []func()
	extra   map[string]http.Handler // beside /metrics on the same listener (a worker's /healthz)
}

// New makes the Set of role with its metrics registered, each labelled
// series known up front already at 0 (Known), plus the Go runtime's and the
// process's own collectors (go_*, process_*).
func New(role Role, known Known) *Set {
	s := &Set{reg: prometheus.NewRegistry(), queues: map[string]bool{}}
	s.defineMetrics()

	for _, k := range known.GovernorEvents {
		s.governorEvents.WithLabelValues(k).Add(0)
	}
	cs := []prometheus.Collector{s.governorEvents, s.governorHeld, s.faultPass, s.cards,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	switch role {
	case Daemon:
		cs = append(cs, s.daemonMetrics(known)...)
	case Worker:
		cs = append(cs, s.workerMetrics(known)...)
	default:
		panic("metrics.New: no such role: " + role.String())
	}
	s.reg.MustRegister(cs...)
	return s
}

// defineMetrics makes every metric a Set can record, whatever its role;
// New registers those its role exports.
func (s *Set) defineMetrics() {
	s.trialsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_trials_started_total",
		Help: "Trial attempts started on this worker, by the Temporal task queue they came from.",
	}, []string{"task_queue"})
	s.trials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_trials_total",
		Help: "Receipts the daemon stored (its own runner's, merged from a worker's spool, or recorded lost), by outcome class (scored, capped, failed_at_card, preempted, error).",
	}, []string{"outcome"})
	s.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_trial_attempts_total",
		Help: "Trial attempts this worker finished, by outcome: its receipt's outcome class, or refused (nothing ran) or failed (no receipt) when it wrote none.",
	}, []string{"outcome"})
	s.trialDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rig_trial_duration_seconds",
		Help:    "A trial's wall time as its receipt records it (the model's work, the runtime's start left out), by outcome.",
		Buckets: prometheus.ExponentialBucketsRange(0.1, 3600, 16),
	}, []string{"outcome"})
	s.attemptSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rig_trial_attempt_duration_seconds",
		Help:    "A trial attempt on a worker from the activity's start to its end (the wait for the card, the runtime's start and the spool write included), by outcome.",
		Buckets: prometheus.ExponentialBucketsRange(0.1, 3600, 16),
	}, []string{"outcome"})
	s.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rig_trials_in_flight",
		Help: "Trial attempts this worker holds now: running, or waiting for its card.",
	})
	s.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rig_queue_depth",
		Help: "Planned trials of the running executions that have no counted receipt yet, by where they run (\"local\" or \"temporal\"); 0 when none run.",
	}, []string{"queue"})
	s.workerState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rig_worker_state",
		Help: "1 for the worker's state now (idle, running, held), 0 for the others.",
	}, []string{"state"})
	s.governorEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_governor_events_total",
		Help: "Governor events, by kind (trip, clear, preempt, stopped, stop-failed, hold, release, heartbeat-stale, heartbeat-fresh).",
	}, []string{"kind"})
	s.governorHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rig_governor_held",
		Help: "1 while the governor holds the queue (no new trial may start), else 0.",
	})
	s.faultPass = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rig_governor_fault_pass_timestamp_seconds",
		Help: "When the newest passing run of the governor's fault suite that this process reads started (Unix seconds; counted trials need it at most 24 h old), 0 when there is none.",
	})
	s.merge = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rig_merge_duration_seconds",
		Help:    "The coordinator's merge of one trial attempt's spool entry into the study's store, by result (merged, already, divergent, refused, failed).",
		Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 14),
	}, []string{"result"})
	s.cards = &cardCollector{samples: map[string]CardSample{}}
}

// daemonMetrics puts the daemon's known series at 0 and returns the
// collectors only the daemon exports.
func (s *Set) daemonMetrics(known Known) []prometheus.Collector {
	for _, o := range known.Outcomes {
		s.trials.WithLabelValues(o).Add(0)
		s.trialDuration.WithLabelValues(o)
	}
	for _, r := range MergeResults {
		s.merge.WithLabelValues(r)
	}
	s.QueueDepths(nil)
	return []prometheus.Collector{s.trials, s.trialDuration, s.queueDepth, s.merge}
}

// workerMetrics puts a worker's known series at 0 and returns the
// collectors only a worker exports.
func (s *Set) workerMetrics(known Known) []prometheus.Collector {
	for _, o := range append(slices.Clone(known.Outcomes), OutcomeRefused, OutcomeFailed) {
		s.attempts.WithLabelValues(o).Add(0)
		s.attemptSeconds.WithLabelValues(o)
	}
	// The state is set before each scrape (OnScrape); until then none
	// is 1.
	for _, st := range WorkerStates {
		s.workerState.WithLabelValues(st).Set(0)
	}
	return []prometheus.Collector{s.trialsStarted, s.attempts, s.attemptSeconds, s.inFlight, s.workerState}
}

// Registry is the Set's registry, for tests and linting.
func (s *Set) Registry() *prometheus.Registry { return s.reg }

// OnScrape adds f to what runs before each scrape: the readings that are
// cheaper taken when asked for than kept current (the card, the queue, the
// worker's state). f runs under the Set's lock, one scrape at a time.
func (s *Set) OnScrape(f func()) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = append(s.refresh, f)
}

// Gather runs the OnScrape functions and gathers every metric: it is the
// prometheus.Gatherer the endpoint serves.
func (s *Set) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.refresh {
		f()
	}
	return s.reg.Gather()
}

// TaskQueues gives the task queues a worker serves their series of
// rig_trials_started_total at 0, before its first trial.
func (s *Set) TaskQueues(queues []string) {
	if s == nil {
		return
	}
	for _, q := range queues {
		s.trialsStarted.WithLabelValues(q).Add(0)
	}
}

// TrialStarted counts a trial attempt that began, from the task queue
// queue.
func (s *Set) TrialStarted(queue string) {
	if s == nil {
		return
	}
	s.trialsStarted.WithLabelValues(queue).Inc()
	s.inFlight.Inc()
	s.running.Add(1)
}

// InFlight is how many attempts TrialStarted counted that have not
// finished: what a worker's state reads.
func (s *Set) InFlight() int {
	if s == nil {
		return 0
	}
	return int(s.running.Load())
}

// AttemptFinished ends an attempt TrialStarted counted: its outcome and
// its length on this worker, start to end.
func (s *Set) AttemptFinished(outcome string, seconds float64) {
	if s == nil {
		return
	}
	s.inFlight.Dec()
	s.running.Add(-1)
	s.attempts.WithLabelValues(outcome).Inc()
	s.attemptSeconds.WithLabelValues(outcome).Observe(seconds)
}

// TrialFinished counts a receipt stored with outcome, and its wall time.
func (s *Set) TrialFinished(outcome string, seconds float64) {
	if s == nil {
		return
	}
	s.trials.WithLabelValues(outcome).Inc()
	s.trialDuration.WithLabelValues(outcome).Observe(seconds)
}

// QueueDepths sets the trials waiting per queue. A queue absent from depth
// (its executions ended, or none ran yet) is 0, never dropped: a series
// that goes away reads to an alert as no data rather than an empty queue.
func (s *Set) QueueDepths(depth map[string]int) {
	if s == nil {
		return
	}
	s.depthMu.Lock()
	defer s.depthMu.Unlock()
	for _, q := range Queues {
		s.queues[q] = true
	}
	for q := range depth {
		s.queues[q] = true
	}
	for q := range s.queues {
		s.queueDepth.WithLabelValues(q).Set(float64(depth[q]))
	}
}

// WorkerState sets the worker's state, one of WorkerStates.
func (s *Set) WorkerState(state string) {
	if s == nil {
		return
	}
	for _, st := range WorkerStates {
		v := 0.0
		if st == state {
			v = 1
		}
		s.workerState.WithLabelValues(st).Set(v)
	}
}

// GovernorEvent counts one governor event of kind.
func (s *Set) GovernorEvent(kind string) {
	if s == nil {
		return
	}
	s.governorEvents.WithLabelValues(kind).Inc()
}

// Hold says whether the governor holds the queue now.
func (s *Set) Hold(on bool) {
	if s == nil {
		return
	}
	if on {
		s.governorHeld.Set(1)
	} else {
		s.governorHeld.Set(0)
	}
}

// FaultPass sets when the newest passing fault-suite run started; the
// zero time says there is none.
func (s *Set) FaultPass(at time.Time) {
	if s == nil {
		return
	}
	v := 0.0
	if !at.IsZero() {
		v = float64(at.UnixMilli()) / 1000
	}
	s.faultPass.Set(v)
}

// MergeObserved records one merge of a spool entry and how it ended.
func (s *Set) MergeObserved(result string, seconds float64) {
	if s == nil {
		return
	}
	s.merge.WithLabelValues(result).Observe(seconds)
}

// CardSample is one reading of a card, in base units. Index and UUID are
// the labels DCGM's exporter gives the same card (gpu, UUID), so the two
// join.
type CardSample struct {
	Index       int
	UUID        string
	UsedBytes   float64
	TotalBytes  float64
	PowerWatts  float64
	EnergyJoule float64 // the driver's counter since it loaded
	HasEnergy   bool    // false on a card without an energy counter
}

// CardSample sets the card's latest reading.
func (s *Set) CardSample(c CardSample) {
	if s == nil {
		return
	}
	s.cards.mu.Lock()
	defer s.cards.mu.Unlock()
	s.cards.samples[strconv.Itoa(c.Index)+"/"+c.UUID] = c
}

// cardCollector exports the latest card readings as they were read. The
// energy is the driver's own counter, so it is exported as a counter
// verbatim rather than accumulated here.
type cardCollector struct {
	mu      sync.Mutex
	samples map[string]CardSample
}

var (
	cardLabels = []string{"gpu", "UUID"}
	cardUsed   = prometheus.NewDesc("rig_card_memory_used_bytes",
		"Card memory in use, the whole card's (DCGM_FI_DEV_FB_USED, which is in MiB).", cardLabels, nil)
	cardTotal = prometheus.NewDesc("rig_card_memory_total_bytes",
		"Card memory in all (DCGM_FI_DEV_FB_TOTAL, in MiB).", cardLabels, nil)
	cardPower = prometheus.NewDesc("rig_card_power_watts",
		"Card power draw now (DCGM_FI_DEV_POWER_USAGE, in W).", cardLabels, nil)
	cardEnergy = prometheus.NewDesc("rig_card_energy_joules_total",
		"Card energy since the driver loaded (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, which is in mJ).", cardLabels, nil)
)

func (c *cardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cardUsed
	ch <- cardTotal
	ch <- cardPower
	ch <- cardEnergy
}

func (c *cardCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.samples))
	for k := range c.samples {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	samples := make([]CardSample, 0, len(keys))
	for _, k := range keys {
		samples = append(samples, c.samples[k])
	}
	c.mu.Unlock()
	for _, s := range samples {
		l := []string{strconv.Itoa(s.Index), s.UUID}
		ch <- prometheus.MustNewConstMetric(cardUsed, prometheus.GaugeValue, s.UsedBytes, l...)
		ch <- prometheus.MustNewConstMetric(cardTotal, prometheus.GaugeValue, s.TotalBytes, l...)
		ch <- prometheus.MustNewConstMetric(cardPower, prometheus.GaugeValue, s.PowerWatts, l...)
		if s.HasEnergy {
			ch <- prometheus.MustNewConstMetric(cardEnergy, prometheus.CounterValue, s.EnergyJoule, l...)
		}
	}
}
