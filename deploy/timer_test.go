package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/governor"
	"rig/internal/testenv"
)

// A fault-suite pass is valid for governor.DefaultPassMaxAge from the
// suite's start. Each launcher renews it sooner than that, by a margin that
// covers its timing's worst case; RigFaultPassRenewalMissed
// (deploy/prometheus/rig-alerts.yaml) fires once a pass is older than any
// launcher lets it grow, and still before it expires.

// systemdAnalyze runs systemd-analyze, which reads calendar expressions and
// time spans as systemd itself does.
func systemdAnalyze(t *testing.T, args ...string) string {
	t.Helper()
	_, err := exec.LookPath("systemd-analyze")
	testenv.NeedsSetup(t, "systemd-analyze (Debian package systemd)", err)
	cmd := exec.Command("systemd-analyze", args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// timespan is a systemd time span (15min, 1h 30min) as systemd reads it.
func timespan(t *testing.T, span string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*μs: (\d+)$`).FindStringSubmatch(systemdAnalyze(t, "timespan", span))
	if m == nil {
		t.Fatalf("systemd-analyze timespan %q: no μs line", span)
	}
	us, _ := strconv.ParseInt(m[1], 10, 64)
	return time.Duration(us) * time.Microsecond
}

// suiteLongest is how long one run of the fault suite may take:
// rig-governor-faults.service's TimeoutStartSec.
func suiteLongest(t *testing.T) time.Duration {
	t.Helper()
	s := readUnit(t, filepath.Join("systemd", "rig-governor-faults.service"))["Service"]
	return timespan(t, one(t, "rig-governor-faults.service", s, "TimeoutStartSec"))
}

// renewalAlertAge is the age of a pass past which RigFaultPassRenewalMissed
// fires: the "> H * 3600" in its expression.
func renewalAlertAge(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("prometheus", "rig-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`alert: RigFaultPassRenewalMissed\s+expr: time\(\) - rig_governor_fault_pass_timestamp_seconds > (\d+) \* 3600`).FindSubmatch(b)
	if m == nil {
		t.Fatal("prometheus/rig-alerts.yaml: no RigFaultPassRenewalMissed of the form time() - rig_governor_fault_pass_timestamp_seconds > H * 3600")
	}
	h, _ := strconv.Atoi(string(m[1]))
	return time.Duration(h) * time.Hour
}

// TestTimerLeavesNoWindowWithoutAPass reads rig-governor-faults.timer's
// calendar as systemd does and finds the longest gap between two of its
// elapse times over a month. The worst night starts a run at the top of
// the randomized delay after one that started at its bottom, and that run
// takes the service's longest: the pass it replaces must still be fresh
// then, and the renewal alert must stay quiet (it fires only when a run
// failed, while the pass has time left).
func TestTimerLeavesNoWindowWithoutAPass(t *testing.T) {
	timer := readUnit(t, filepath.Join("systemd", "rig-governor-faults.timer"))["Timer"]
	calendar := one(t, "rig-governor-faults.timer", timer, "OnCalendar")
	delay := timespan(t, one(t, "rig-governor-faults.timer", timer, "RandomizedDelaySec"))
	out := systemdAnalyze(t, "calendar", "--iterations=60", calendar)
	var elapses []time.Time
	for _, m := range regexp.MustCompile(`(?m)(?:Next elapse|Iter\. #\d+): (\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC$`).FindAllStringSubmatch(out, -1) {
		at, err := time.Parse("Mon 2006-01-02 15:04:05", m[1])
		if err != nil {
			t.Fatal(err)
		}
		elapses = append(elapses, at)
	}
	if len(elapses) != 60 {
		t.Fatalf("systemd-analyze calendar %q: read %d elapse times, want 60:\n%s", calendar, len(elapses), out)
	}
	var gap time.Duration
	for i := 1; i < len(elapses); i++ {
		gap = max(gap, elapses[i].Sub(elapses[i-1]))
	}
	worst := gap + delay + suiteLongest(t)
	t.Logf("OnCalendar=%s: longest gap %s, + delay %s + the suite's longest run %s = %s; a pass lasts %s", calendar, gap, delay, suiteLongest(t), worst, governor.DefaultPassMaxAge)
	if worst >= governor.DefaultPassMaxAge {
		t.Errorf("rig-governor-faults.timer: a pass may be %s old before the next is written, past its %s validity: workers hold and counted runs are refused meanwhile", worst, governor.DefaultPassMaxAge)
	}
	if alert := renewalAlertAge(t); worst >= alert || alert >= governor.DefaultPassMaxAge {
		t.Errorf("RigFaultPassRenewalMissed fires past %s; the timer's passes reach %s and expire at %s: it must fire after the one and before the other", alert, worst, governor.DefaultPassMaxAge)
	}
}

// TestSlurmRenewalLeavesNoWindow reads the Slurm script's renewal settings
// (their defaults): a pass is renewed once it is older than
// RIG_FAULTS_RENEW_AFTER, checked every RIG_FAULTS_CHECK_EVERY; with the
// suite's longest run it stays under the renewal alert's age, and so
// under its validity, however long the job runs.
// TestSlurmJobRenewsItsPassAndDrainsOnTheWarning runs that renewal.
func TestSlurmRenewalLeavesNoWindow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("slurm", "rig-worker.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		m := regexp.MustCompile(`\$\{` + name + `:-([^}]+)\}`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("slurm/rig-worker.sbatch: no ${%s:-default}", name)
		}
		return string(m[1])
	}
	renewAfter, err := time.ParseDuration(def("RIG_FAULTS_RENEW_AFTER"))
	if err != nil {
		t.Fatalf("slurm/rig-worker.sbatch: RIG_FAULTS_RENEW_AFTER's default: %v (rig governor status --max-age reads a Go duration)", err)
	}
	every, err := strconv.Atoi(def("RIG_FAULTS_CHECK_EVERY"))
	if err != nil {
		t.Fatalf("slurm/rig-worker.sbatch: RIG_FAULTS_CHECK_EVERY's default is not seconds: %v", err)
	}
	worst := renewAfter + time.Duration(every)*time.Second + suiteLongest(t)
	if alert := renewalAlertAge(t); worst >= alert || alert >= governor.DefaultPassMaxAge {
		t.Errorf("slurm/rig-worker.sbatch: a pass may grow %s old; RigFaultPassRenewalMissed fires past %s and a pass expires at %s", worst, alert, governor.DefaultPassMaxAge)
	}
	if !strings.Contains(string(b), "--max-age \"$1\"") {
		t.Error("slurm/rig-worker.sbatch: the renewal does not ask rig governor status for the renewal age")
	}
}
