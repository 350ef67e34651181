package deploy

import (
	"bytes"
	"context"
	"errors"
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
	volumes map[string]string // volume name → the folder standing for it
	image   map[string]string // a path inside the site's image → here
}

func newPod(t *testing.T, d *appsv1.Deployment) *pod {
	t.Helper()
	p := &pod{name: "rig-worker-7d9f8c-x2x4q", volumes: map[string]string{},
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

// run runs container c with its args (the image's entrypoint is rig) and
// extra after them, its paths mapped to this machine.
func (p *pod) run(t *testing.T, c corev1.Container, timeout time.Duration, extra ...string) string {
	t.Helper()
	if len(c.Command) > 0 {
		t.Fatalf("%s: container %s sets a command; run gives rig, the entrypoint, its args", manifest, c.Name)
	}
	env := p.env(t, c)
	args := slices.Clone(c.Args)
	for i, a := range args {
		args[i] = dependentVar.ReplaceAllStringFunc(a, func(m string) string { return env[m[2:len(m)-1]] })
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rigBin, append(args, extra...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+p.local(c, v))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("container %s: rig %s: %v\n%s", c.Name, strings.Join(args, " "), err, out.String())
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
// worker must find that pass. The nightly container must write to the same
// folder, more often than the pass expires.
func TestKubernetesWorkerReadsTheInitContainersPass(t *testing.T) {
	d := deployment(t)
	spec := d.Spec.Template.Spec
	suite := container(t, spec.InitContainers, "fault-suite")
	worker := container(t, spec.Containers, "worker")
	nightly := container(t, spec.Containers, "fault-suite-nightly")
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
	if got := stateOf(nightly); got != state {
		t.Errorf("the nightly suite writes to %s, the worker reads %s", got, state)
	}
	sh := strings.Join(nightly.Command, " ")
	m := regexp.MustCompile(`sleep (\d+); do rig governor faults; done`).FindStringSubmatch(sh)
	if m == nil {
		t.Fatalf("the nightly container runs %q, not a loop of rig governor faults", sh)
	}
	if every, _ := strconv.Atoi(m[1]); time.Duration(every)*time.Second >= 24*time.Hour {
		t.Errorf("the nightly suite runs every %ss: the pass expires after 24h", m[1])
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
