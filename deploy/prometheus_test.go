package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// promtool is the Prometheus server's own checker and rule-test runner,
// from the pinned Debian package (scripts/test-tools/promtool.sh).
func promtool(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	bin, err := provision.TestTool("PROMTOOL_BIN")
	testenv.NeedsSetup(t, "promtool (scripts/test-tools/promtool.sh)", err)
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const alertRules = "prometheus/rig-alerts.yaml"

// TestExampleAlertsPassTheirRuleTests checks the example rules and runs
// their cases through promtool's rule evaluation; a copy whose worker-held
// alert waits twice as long must fail those cases.
func TestExampleAlertsPassTheirRuleTests(t *testing.T) {
	if out, err := promtool(t, nil, "check", "rules", alertRules); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertRules, err, out)
	}
	if out, err := promtool(t, nil, "test", "rules", "prometheus/rig-alerts.test.yaml"); err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules prometheus/rig-alerts.test.yaml: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, f := range []string{"rig-alerts.yaml", "rig-alerts.test.yaml"} {
		b, err := os.ReadFile(filepath.Join("prometheus", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "rig-alerts.yaml" {
			slower := bytes.Replace(b, []byte("for: 15m"), []byte("for: 30m"), 1)
			if bytes.Equal(slower, b) {
				t.Fatal("prometheus/rig-alerts.yaml: no for: 15m to change")
			}
			b = slower
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := promtool(t, nil, "test", "rules", filepath.Join(dir, "rig-alerts.test.yaml")); err == nil || !strings.Contains(out, "RigWorkerHeld") {
		t.Errorf("promtool test rules passed rules whose RigWorkerHeld waits 30 minutes: %v\n%s", err, out)
	}
}

// liveProcess is a rig process started for real, and where it serves
// /metrics.
type liveProcess struct {
	*proc
	url, instance, job string
}

var metricsAddr = regexp.MustCompile(`msg=metrics addr=(http://127\.0\.0\.1:\d+/metrics)`)

// startLive starts rig with args and env, and waits for its metrics.
func startLive(t *testing.T, job string, env []string, args ...string) liveProcess {
	t.Helper()
	cmd := exec.Command(rigBin, args...)
	cmd.Env = env
	p := start(t, cmd)
	url := p.waitFor(t, metricsAddr, 2*time.Minute)[1]
	return liveProcess{proc: p, url: url, instance: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics"), job: job}
}

// sample is the value of series (name{labels} exactly as the exposition
// writes it) in body.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the exposition has no %s:\n%s", series, body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

// TestLiveExpositionPassesPromtool starts a real daemon and a real worker
// (connected to a real Temporal server; no fault-suite pass, so it is
// held), lints each one's live exposition with promtool check metrics, and
// reads there, at 0 from the start, the series the example alerts watch.
// The worker's governor is then stalled for real (--fault-injection,
// SIGUSR1): its heartbeat goes stale, the first governor event since it
// started. The series of both scrapes, before and after, go through the
// example rules in promtool's rule evaluation: the first increase after a
// start is seen by increase(), and the alerts on the live values fire.
func TestLiveExpositionPassesPromtool(t *testing.T) {
	if _, err := promtool(t, nil, "--version"); err != nil {
		t.Fatalf("promtool --version: %v", err)
	}
	engine := startEngine(t)
	tmp := t.TempDir()
	env := func(home string) []string {
		return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tmp, "RIG_HOME=" + filepath.Join(tmp, home),
			"RIG_STATE_DIR=" + filepath.Join(tmp, "state"), "RIG_CACHE=" + provision.CacheDir(),
			"RIG_DAEMON_LOCK=" + filepath.Join(tmp, "daemon.lock")}
	}
	daemon := startLive(t, "rig-daemon", env("daemon"), "daemon", "--metrics", "127.0.0.1:0", "--policy=")
	worker := startLive(t, "rig-worker", env("worker"), "worker", "--temporal", engine, "--spool", filepath.Join(tmp, "spool"),
		"--id", "live-worker", "--fault-injection", "--metrics", "127.0.0.1:0")
	worker.waitFor(t, regexp.MustCompile(`worker live-worker: serving`), time.Minute)

	scrape := func(p liveProcess) string {
		t.Helper()
		code, body := get(t, p.url)
		if code != 200 {
			t.Fatalf("GET %s: %d\n%s", p.url, code, body)
		}
		if out, err := promtool(t, []byte(body), "check", "metrics"); err != nil || out != "" {
			t.Errorf("promtool check metrics on %s's live exposition: %v\n%s", p.job, err, out)
		}
		return body
	}
	watched := map[*liveProcess][]string{
		&daemon: {`rig_trials_total{outcome="preempted"}`, `rig_governor_fault_pass_timestamp_seconds`},
		&worker: {`rig_trial_attempts_total{outcome="preempted"}`, `rig_governor_events_total{kind="heartbeat-stale"}`,
			`rig_governor_fault_pass_timestamp_seconds`, `rig_worker_state{state="held"}`},
	}
	before := map[string]float64{}
	for p, series := range watched {
		body := scrape(*p)
		for _, s := range series {
			before[p.job+" "+s] = sample(t, body, s)
		}
	}
	for _, s := range []string{`rig-daemon rig_trials_total{outcome="preempted"}`, `rig-worker rig_trial_attempts_total{outcome="preempted"}`,
		`rig-worker rig_governor_events_total{kind="heartbeat-stale"}`} {
		if before[s] != 0 {
			t.Errorf("%s is %v at start, want 0: the first increase would go unseen", s, before[s])
		}
	}
	if before[`rig-worker rig_worker_state{state="held"}`] != 1 {
		t.Errorf("the worker without a fault-suite pass is not held in its exposition")
	}

	// Promtool's own linter fails on what breaks Prometheus' conventions.
	bad := scrape(worker) + "# HELP rig_bad a counter named without _total\n# TYPE rig_bad counter\nrig_bad 1\n"
	if out, err := promtool(t, []byte(bad), "check", "metrics"); err == nil || !strings.Contains(out, "rig_bad") {
		t.Errorf("promtool check metrics passed a counter without _total: %v\n%s", err, out)
	}

	if err := worker.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	after := map[string]float64{}
	stale := `rig-worker rig_governor_events_total{kind="heartbeat-stale"}`
	for deadline := time.Now().Add(45 * time.Second); after[stale] == 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled governor's heartbeat-stale count did not move in 45 s:\n%s", worker.out)
		}
		for p, series := range watched {
			body := scrape(*p)
			for _, s := range series {
				after[p.job+" "+s] = sample(t, body, s)
			}
		}
	}
	runLiveRuleTest(t, watched, before, after)
}

// runLiveRuleTest writes a promtool rule test whose input series are the
// live samples, five minutes of before then twenty of after, and whose
// expected alerts follow from them; promtool then evaluates the shipped
// rules on it.
func runLiveRuleTest(t *testing.T, watched map[*liveProcess][]string, before, after map[string]float64) {
	t.Helper()
	rules, err := filepath.Abs(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	annotations := alertAnnotations(t)
	var in, exp strings.Builder
	fmt.Fprintf(&in, "rule_files: [%q]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	var stale, held []string // the instances each alert should name
	procs := slices.SortedFunc(maps.Keys(watched), func(a, b *liveProcess) int { return strings.Compare(a.job, b.job) })
	for _, p := range procs {
		for _, s := range watched[p] {
			name, labels, _ := strings.Cut(strings.TrimSuffix(s, "}"), "{")
			lbl := fmt.Sprintf(`instance=%q, job=%q`, p.instance, p.job)
			if labels != "" {
				lbl = labels + ", " + lbl
			}
			b, a := before[p.job+" "+s], after[p.job+" "+s]
			fmt.Fprintf(&in, "      - series: '%s{%s}'\n        values: '%sx4 %sx20'\n", name, lbl, num(b), num(a))
			switch {
			case name == "rig_governor_fault_pass_timestamp_seconds" && a == 0:
				stale = append(stale, p.instance+" "+p.job)
			case s == `rig_worker_state{state="held"}` && b == 1 && a == 1:
				held = append(held, p.instance+" "+p.job)
			}
		}
	}
	expect := func(at, alert string, firing []string, labels string, value string) {
		fmt.Fprintf(&exp, "      - eval_time: %s\n        alertname: %s\n        exp_alerts:", at, alert)
		if len(firing) == 0 {
			exp.WriteString(" []\n")
			return
		}
		exp.WriteString("\n")
		for _, f := range firing {
			instance, job, _ := strings.Cut(f, " ")
			fmt.Fprintf(&exp, "          - exp_labels: {%s instance: %q, job: %q}\n            exp_annotations:\n", labels, instance, job)
			for _, k := range []string{"description", "summary"} {
				v := strings.NewReplacer("{{ $labels.instance }}", instance, "{{ $value }}", value).Replace(annotations[alert][k])
				fmt.Fprintf(&exp, "              %s: %q\n", k, v)
			}
		}
	}
	w := after[`rig-worker rig_governor_events_total{kind="heartbeat-stale"}`] - before[`rig-worker rig_governor_events_total{kind="heartbeat-stale"}`]
	worker := procs[len(procs)-1] // rig-worker sorts after rig-daemon
	wk := []string{worker.instance + " " + worker.job}
	expect("4m", "RigGovernorHeartbeatStale", nil, "", "")
	expect("6m", "RigGovernorHeartbeatStale", wk, `severity: warning, kind: "heartbeat-stale",`, num(w))
	expect("6m", "RigTrialPreempted", nil, "", "")
	expect("4m", "RigFaultPassStale", nil, "", "")
	expect("10m", "RigFaultPassStale", stale, "severity: critical,", "0")
	expect("20m", "RigWorkerHeld", held, `severity: warning, state: "held",`, "1")
	if len(stale) != 2 || len(held) != 1 {
		t.Errorf("from the live values, %d processes without a pass (want the daemon and the worker) and %d workers held (want 1)", len(stale), len(held))
	}
	path := filepath.Join(t.TempDir(), "live.test.yaml")
	if err := os.WriteFile(path, []byte(in.String()+"    alert_rule_test:\n"+exp.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	t.Logf("promtool test rules on the live series:\n%s", b)
	if out, err := promtool(t, nil, "test", "rules", path); err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules on the live series: %v\n%s", err, out)
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// alertAnnotations are the shipped rules' annotation templates, by alert.
func alertAnnotations(t *testing.T) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	out := map[string]map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Annotations
		}
	}
	return out
}
