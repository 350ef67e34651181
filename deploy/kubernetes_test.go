package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// The manifest is decoded strictly into the Kubernetes API's own Go types
// (k8s.io/api, the source the API server's schema is generated from), with
// the API server's own strict decoder (sigs.k8s.io/json): an unknown,
// misspelt or repeated field, or a value of the wrong type, fails. Its
// containers then run as the kubelet would run them, with the real rig as
// the image's entrypoint, each volume a folder shared by the containers
// that mount it, and the image's provisioned cache the machine's.

const manifest = "kubernetes/rig-worker.yaml"

func readDeployment(t *testing.T, b []byte) (*appsv1.Deployment, error) {
	t.Helper()
	// As the API server decodes with field validation Strict: YAML with no
	// duplicate keys, then JSON matched to the fields case-sensitively,
	// every unknown field an error.
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	strict, err := kjson.UnmarshalStrict(j, &d)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(strict...); err != nil {
		return nil, err
	}
	return &d, nil
}

func deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readDeployment(t, b)
	if err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Fatalf("%s: %s %s, want apps/v1 Deployment", manifest, d.APIVersion, d.Kind)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Fatalf("%s: the selector's %s=%s is not on the pod template", manifest, k, v)
		}
	}
	return d
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s: no container %q", manifest, name)
	return corev1.Container{}
}

// pod runs a Deployment's containers on this machine.
type pod struct {
	name    string
	ip      string            // the pod's address: a loopback address of its own here
	volumes map[string]string // volume name → the folder standing for it
	image   map[string]string // a path inside the site's image → here
}

func newPod(t *testing.T, d *appsv1.Deployment) *pod {
	t.Helper()
	// Every 127.0.0.0/8 address is this machine's loopback: one picked at
	// random stands for the pod's own IP, on which nothing else listens.
	ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(256), 1+rand.IntN(250))
	p := &pod{name: "rig-worker-7d9f8c-x2x4q", ip: ip, volumes: map[string]string{},
		image: map[string]string{"/opt/rig/cache": provision.CacheDir()}}
	for _, v := range d.Spec.Template.Spec.Volumes {
		p.volumes[v.Name] = t.TempDir()
	}
	return p
}

// local is where the container's path v lies here: under the folder of a
// volume it mounts, or the image's.
func (p *pod) local(c corev1.Container, v string) string {
	for _, m := range c.VolumeMounts {
		if v == m.MountPath || strings.HasPrefix(v, m.MountPath+"/") {
			return filepath.Join(p.volumes[m.Name], strings.TrimPrefix(v, m.MountPath))
		}
	}
	for in, here := range p.image {
		if v == in || strings.HasPrefix(v, in+"/") {
			return filepath.Join(here, strings.TrimPrefix(v, in))
		}
	}
	return v
}

var dependentVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// env is the container's environment as the kubelet sets it: values in
// order, $(VAR) of an earlier one expanded, the downward API's pod name.
func (p *pod) env(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = p.name
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = p.ip
		case e.ValueFrom != nil:
			t.Fatalf("%s: container %s: env %s: a valueFrom this test does not resolve", manifest, c.Name, e.Name)
		default:
			env[e.Name] = dependentVar.ReplaceAllStringFunc(e.Value, func(m string) string {
				if v, ok := env[m[2:len(m)-1]]; ok {
					return v
				}
				return m
			})
		}
	}
	return env
}

// command is container c as the kubelet would start it (the image's
// entrypoint is rig) with extra after its args, its paths mapped to this
// machine; override replaces environment values (a cluster's DNS name
// standing for what runs here).
func (p *pod) command(ctx context.Context, t *testing.T, c corev1.Container, override map[string]string, extra ...string) *exec.Cmd {
	t.Helper()
	if len(c.Command) > 0 {
		t.Fatalf("%s: container %s sets a command; run gives rig, the entrypoint, its args", manifest, c.Name)
	}
	env := p.env(t, c)
	args := slices.Clone(c.Args)
	for i, a := range args {
		args[i] = dependentVar.ReplaceAllStringFunc(a, func(m string) string { return env[m[2:len(m)-1]] })
	}
	cmd := exec.CommandContext(ctx, rigBin, append(args, extra...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}
	for k, v := range env {
		if o, ok := override[k]; ok {
			v = o
		}
		cmd.Env = append(cmd.Env, k+"="+p.local(c, v))
	}
	return cmd
}

// run runs container c to its end (see command).
func (p *pod) run(t *testing.T, c corev1.Container, timeout time.Duration, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := p.command(ctx, t, c, nil, extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("container %s: %s: %v\n%s", c.Name, strings.Join(cmd.Args, " "), err, out.String())
	}
	return out.String()
}

func TestKubernetesManifestIsStrictlyValid(t *testing.T) {
	d := deployment(t)
	if *d.Spec.Replicas < 1 {
		t.Errorf("%s: %d replicas", manifest, *d.Spec.Replicas)
	}
	// The check can fail: a misspelt field is refused.
	b, _ := os.ReadFile(manifest)
	bad := bytes.Replace(b, []byte("mountPath: /spool"), []byte("mountpath: /spool"), 1)
	if bytes.Equal(bad, b) {
		t.Fatal("the negative check found no mountPath: /spool to misspell")
	}
	if _, err := readDeployment(t, bad); err == nil || !strings.Contains(err.Error(), "mountpath") {
		t.Fatalf("a manifest with a misspelt field decoded: %v", err)
	}
}

// TestKubernetesWorkerReadsTheInitContainersPass runs the init container
// (the real fault suite) and then the worker container in its dry run: the
// worker must find that pass. The renewal container must write to the same
// folder, more often than the pass expires.
func TestKubernetesWorkerReadsTheInitContainersPass(t *testing.T) {
	d := deployment(t)
	spec := d.Spec.Template.Spec
	suite := container(t, spec.InitContainers, "fault-suite")
	worker := container(t, spec.Containers, "worker")
	renewal := container(t, spec.Containers, "fault-suite-renewal")
	if !slices.Equal(suite.Args, []string{"governor", "faults"}) {
		t.Fatalf("the init container runs rig %v, want rig governor faults", suite.Args)
	}
	p := newPod(t, d)
	stateOf := func(c corev1.Container) string {
		s := p.env(t, c)["RIG_STATE_DIR"]
		if s == "" {
			t.Fatalf("container %s sets no RIG_STATE_DIR", c.Name)
		}
		return filepath.Join(p.local(c, s), "governor")
	}
	state := stateOf(worker)
	if got := stateOf(renewal); got != state {
		t.Errorf("the renewal container writes to %s, the worker reads %s", got, state)
	}
	sh := strings.Join(renewal.Command, " ")
	m := regexp.MustCompile(`sleep (\d+); do rig governor faults; done`).FindStringSubmatch(sh)
	if m == nil {
		t.Fatalf("the renewal container runs %q, not a loop of rig governor faults", sh)
	}
	longest, renewedBy := suiteLongest(t), renewalAlertAge(t)
	if every, _ := strconv.Atoi(m[1]); time.Duration(every)*time.Second+longest > renewedBy {
		t.Errorf("the renewal container runs every %ss: with a run of up to %s the pass grows older than the %s after which RigFaultPassRenewalMissed fires", m[1], longest, renewedBy)
	}

	before := settings(t, p.run(t, worker, time.Minute, "--dry-run"))
	if !strings.HasPrefix(before["fault-suite pass"], "none") {
		t.Errorf("before the init container ran, the worker reports %q", before["fault-suite pass"])
	}
	if before["id"] != p.name || before["card"] != "0" {
		t.Errorf("the worker is %q on card %s, want the pod's name on card 0", before["id"], before["card"])
	}

	needSuite(t)
	if got := stateOf(suite); got != state {
		t.Fatalf("the init container writes to %s, the worker reads %s", got, state)
	}
	out := p.run(t, suite, 10*time.Minute)
	if recs := records(t, state); len(recs) != 1 {
		t.Fatalf("the init container left %d records in %s, want 1:\n%s", len(recs), state, out)
	}
	wantPassFor(t, settings(t, p.run(t, worker, time.Minute, "--dry-run")), state)
}

// TestKubernetesManifestPassesTheSchemaValidator runs kubernetes-validate,
// whose wheel bundles the Kubernetes API's JSON schemas (pinned in
// internal/provision/test-tools.env, nothing fetched now), on the manifest
// in strict mode; and on broken copies, which it must refuse, naming the
// field.
func TestKubernetesManifestPassesTheSchemaValidator(t *testing.T) {
	bin, err := provision.TestTool("KUBERNETES_VALIDATE_BIN")
	testenv.NeedsSetup(t, "kubernetes-validate (scripts/test-tools/kubernetes-validate.sh)", err)
	validate := func(path string) (string, error) {
		out, err := exec.Command(bin, "--strict", path).CombinedOutput()
		return string(out), err
	}
	if out, err := validate(manifest); err != nil || !strings.Contains(out, "passed") {
		t.Fatalf("kubernetes-validate --strict %s: %v\n%s", manifest, err, out)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, from, to, named string }{
		{"a misspelt field", "timeoutSeconds: 5", "timeoutSecond: 5", "timeoutSecond"},
		{"a string where an integer goes", "periodSeconds: 20", `periodSeconds: "20s"`, "periodSeconds"},
		{"a required field missing", "mountPath: /spool", "mountpath: /spool", "mountPath"},
	} {
		bad := bytes.Replace(b, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: the manifest has no %q to break", c.what, c.from)
		}
		path := filepath.Join(t.TempDir(), "rig-worker.yaml")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := validate(path); err == nil || !strings.Contains(out, c.named) {
			t.Errorf("kubernetes-validate took the manifest with %s (%s → %s): %v\n%s", c.what, c.from, c.to, err, out)
		}
	}
}

// probeURL is the URL the kubelet requests for an HTTP probe of a pod at
// ip: the port by its name among the container's ports.
func probeURL(t *testing.T, c corev1.Container, pr *corev1.Probe, ip string) string {
	t.Helper()
	if pr == nil || pr.HTTPGet == nil {
		t.Fatalf("%s: container %s: a probe that is not an HTTP GET", manifest, c.Name)
	}
	port := pr.HTTPGet.Port.IntValue()
	if name := pr.HTTPGet.Port.StrVal; name != "" {
		for _, cp := range c.Ports {
			if cp.Name == name {
				port = int(cp.ContainerPort)
			}
		}
	}
	if port == 0 {
		t.Fatalf("%s: container %s: the probe's port %s is none of its ports", manifest, c.Name, pr.HTTPGet.Port.String())
	}
	return fmt.Sprintf("http://%s:%d%s", ip, port, pr.HTTPGet.Path)
}

// TestKubernetesProbesReachTheWorker starts the worker container as the
// kubelet would, with the pod's address, against a real Temporal server
// standing for the cluster's, and requests its probes' URLs on that
// address, as the kubelet does: liveness answers, readiness says the
// worker is held (no fault-suite pass yet: the init container's run is
// left out) and why, and Prometheus' scrape of the same port is served.
// Nothing answers on the pod's address at the API socket's place: only
// /metrics and /healthz are served there.
func TestKubernetesProbesReachTheWorker(t *testing.T) {
	engine := startEngine(t)
	d := deployment(t)
	worker := container(t, d.Spec.Template.Spec.Containers, "worker")
	p := newPod(t, d)
	for _, pr := range []*corev1.Probe{worker.StartupProbe, worker.LivenessProbe, worker.ReadinessProbe} {
		if pr == nil {
			t.Fatalf("%s: the worker container lacks a startup, liveness or readiness probe", manifest)
		}
	}
	if ann := d.Spec.Template.Annotations; ann["prometheus.io/scrape"] != "true" {
		t.Errorf("%s: the pod template does not ask to be scraped (prometheus.io/scrape)", manifest)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := start(t, p.command(ctx, t, worker, map[string]string{"RIG_TEMPORAL": engine}))
	w.waitFor(t, regexp.MustCompile(`msg=metrics addr=http://`+regexp.QuoteMeta(p.ip)+`:\d+/metrics`), 2*time.Minute)
	w.waitFor(t, regexp.MustCompile(`worker \S+: serving`), time.Minute)

	for _, pr := range []*corev1.Probe{worker.StartupProbe, worker.LivenessProbe} {
		if code, body := get(t, probeURL(t, worker, pr, p.ip)); code < 200 || code >= 400 {
			t.Errorf("the liveness probe %s answers %d: the kubelet would restart a worker that only waits for its pass\n%s", probeURL(t, worker, pr, p.ip), code, body)
		}
	}
	code, body := get(t, probeURL(t, worker, worker.ReadinessProbe, p.ip))
	if code != 503 || !strings.Contains(body, "fault-injection pass") {
		t.Errorf("the readiness probe of a worker with no fault-suite pass answers %d %q; want 503 naming the pass", code, body)
	}
	_, metricsBody := get(t, fmt.Sprintf("http://%s:%d/metrics", p.ip, worker.Ports[0].ContainerPort))
	if !strings.Contains(metricsBody, "\nrig_worker_state{state=\"held\"} 1\n") {
		t.Errorf("a scrape of the pod's address does not show the worker held:\n%s", metricsBody)
	}
	if code, _ := get(t, fmt.Sprintf("http://%s:%d/v1/studies", p.ip, worker.Ports[0].ContainerPort)); code != 404 {
		t.Errorf("the pod's metrics port answers %d to an API path; it serves /metrics and /healthz only", code)
	}
}
