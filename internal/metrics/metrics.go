package metrics

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

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

// Set is one process's metrics: a registry of its own (no global state)
// and every metric rig exports. The daemon and each worker make one; the
// zero value is not usable, and a nil *Set records nothing, so callers
// that run without metrics need no branches.
type Set struct {
	reg *prometheus.Registry

	trialsStarted  *prometheus.CounterVec
	trials         *prometheus.CounterVec
	trialDuration  *prometheus.HistogramVec
	attemptSeconds *prometheus.HistogramVec
	inFlight       prometheus.Gauge
	running        atomic.Int64 // inFlight's value, for WorkerState's caller
	queueDepth     *prometheus.GaugeVec
	workerState    *prometheus.GaugeVec
	governorEvents *prometheus.CounterVec
	governorHeld   prometheus.Gauge
	merge          *prometheus.HistogramVec
	cards          *cardCollector

	mu      sync.Mutex // one refresh and gather at a time
	refresh []func()
	extra   map[string]http.Handler // beside /metrics on the same listener (a worker's /healthz)
}

// New makes a Set with every metric registered, plus the Go runtime's and
// the process's own collectors (go_*, process_*).
func New() *Set {
	s := &Set{reg: prometheus.NewRegistry()}
	s.trialsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_trials_started_total",
		Help: "Trial attempts started, by the task queue they came from (\"local\" for the daemon's own runner).",
	}, []string{"queue"})
	s.trials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rig_trials_total",
		Help: "Trial attempts finished, by outcome: a receipt's outcome class (scored, capped, failed_at_card, preempted, error), or on a worker refused or failed when no receipt was written.",
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
		Help: "Trial attempts this process holds now: running, or waiting for its card.",
	})
	s.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rig_queue_depth",
		Help: "Planned trials of the running executions that have no counted receipt yet, by where they run (\"local\" or \"temporal\").",
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
	s.merge = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rig_merge_duration_seconds",
		Help:    "The coordinator's merge of one trial attempt's spool entry into the study's store, by result (merged, already, divergent, refused, failed).",
		Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 14),
	}, []string{"result"})
	s.cards = &cardCollector{samples: map[string]CardSample{}}
	s.reg.MustRegister(s.trialsStarted, s.trials, s.trialDuration, s.attemptSeconds, s.inFlight, s.queueDepth,
		s.workerState, s.governorEvents, s.governorHeld, s.merge, s.cards,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
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

// TrialStarted counts a trial attempt that began, from queue.
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
	s.trials.WithLabelValues(outcome).Inc()
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

// QueueDepths sets the trials waiting per queue; a queue absent from depth
// is dropped (its executions ended).
func (s *Set) QueueDepths(depth map[string]int) {
	if s == nil {
		return
	}
	s.queueDepth.Reset()
	for q, n := range depth {
		s.queueDepth.WithLabelValues(q).Set(float64(n))
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
