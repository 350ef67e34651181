package scaleout

import (
	"fmt"
	"slices"

	"rig/internal/atomicfile"
	"rig/internal/serverspec"
	"rig/runtimes"
	"rig/studies"
)

// serverStack is the stack a trial of an openai-server arm runs on, as
// this worker has it: the frozen server's executable at the frozen path
// with the frozen sha256, and its Python environment with the frozen
// digest. It returns the executable's sha256 (the arm's queue names it). A
// server that is not here, or differs, is refused naming the pin the
// freeze recorded (server:ARM or server-env:ARM) and the fix; the runner
// would refuse it too, as a stale asset, but only after taking the trial.
func serverStack(snap *studies.Snapshot, arm string) (string, error) {
	fa, ok := snap.Arm(arm)
	b, frozen := fa.Server()
	if !ok || !frozen {
		return "", fmt.Errorf("arm %s: the snapshot holds no frozen server (freeze the study again)", arm)
	}
	sum, err := runtimes.FileSHA256(b.Path)
	if err != nil {
		return "", fmt.Errorf("pin server:%s: the server's executable %s is not on this worker (%v): install the same server at the same path, or run the arm's trials on a worker that has it", arm, b.Path, err)
	}
	if sum != b.SHA256 {
		return "", fmt.Errorf("pin server:%s: %s has sha256 %s on this worker, the snapshot pins %s: install the frozen server, or run the arm's trials on a worker that has it", arm, b.Path, sum, b.SHA256)
	}
	if b.EnvSHA256 != "" {
		env, _, err := serverspec.PythonEnvDigest(b.PythonEnv)
		if err != nil {
			return "", fmt.Errorf("pin server-env:%s: %v: install the server's environment at %s as frozen", arm, err, b.PythonEnv)
		}
		if env != b.EnvSHA256 {
			return "", fmt.Errorf("pin server-env:%s: the Python environment %s digests to %s on this worker, the snapshot pins %s (its installed distributions differ): install the frozen versions", arm, b.PythonEnv, env, b.EnvSHA256)
		}
	}
	return sum, nil
}

// stackSHA256 is the sha256 of the stack trial in runs on here: the build
// of its runtime, or for an openai-server arm the server the snapshot froze
// (serverStack).
func (w *Worker) stackSHA256(in TrialInput) (string, error) {
	if in.Runtime != serverspec.Kind {
		b, err := runtimes.BuildOf(w.opts.Installed, in.Runtime)
		return b.BinarySHA256, err
	}
	snap, _, err := readPublished(w.opts.Config.Spool, in.Study, in.Execution, in.DesignHash)
	if err != nil {
		return "", err
	}
	return serverStack(snap, mustArm(in.Key))
}

// serverQueues are the queues of the openai-server arms of the study a
// worker was started for whose server is here as frozen; an arm whose
// server is not is logged, naming the pin, and its queue not served. A
// worker started for no study serves such an arm only through --queue:
// without the snapshot it cannot know the server.
func serverQueues(opts WorkerOptions) []string {
	if opts.Study == "" {
		return nil
	}
	x, err := execSpool(opts.Config.Spool, opts.Study, opts.Execution)
	if err != nil {
		return nil
	}
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(x.Snapshot(), &snap); err != nil {
		return nil // NewWorker has said the snapshot is there; the study check says it if it goes
	}
	var out []string
	for _, fa := range snap.Arms {
		if _, ok := fa.Server(); !ok {
			continue
		}
		sum, err := serverStack(&snap, fa.Name)
		if err != nil {
			opts.Log.Info("openai-server arm's server not here as frozen: its queue is not served", "arm", fa.Name, "err", err)
			continue
		}
		if q := Queue(serverspec.Kind, sum, opts.CardClass); !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}
