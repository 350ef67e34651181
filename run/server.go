package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"rig/runtimes"
	"rig/studies"
)

// startServer starts an openai-server arm's server (under Aider or not)
// from its frozen executable and environment: one that changed since the
// freeze is a stale asset, never run.
func (x *trialRunner) startServer(ctx context.Context, arm studies.Arm, fa studies.FrozenArm) (runtimes.Runtime, error) {
	b, frozen := fa.Server()
	if arm.Server == nil || !frozen {
		return nil, fmt.Errorf("arm %s: an openai-server arm with no frozen server (freeze the study again)", arm.Name)
	}
	spec := *arm.Server
	spec.Command = append([]string{b.Path}, spec.Command[1:]...)
	spec.PythonEnv = b.PythonEnv
	cfg := runtimes.Config{Model: fa.ModelPath, ModelName: arm.Model.RegistryName, ModelSHA256: fa.ModelSHA256,
		Context: arm.Pins.Context, WorkDir: filepath.Join(x.workDir, "rt-"+arm.Name), NoSandbox: x.env.NoSandbox,
		Slots: arm.Pins.SlotCount()}
	// The server is held at its start to the pins every request sends.
	want := runtimes.RequestPins{Sampling: samplingOf(arm.Pins), StopCap: arm.Pins.StopCap}
	rt, err := runtimes.StartOpenAIServer(ctx, spec, cfg, runtimes.ServerAssets{ExecutableSHA256: b.SHA256, EnvSHA256: b.EnvSHA256}, want)
	if errors.Is(err, runtimes.ErrStaleServer) {
		return nil, &studies.StaleAssetError{Asset: "server:" + arm.Name, Field: "arms." + arm.Name + ".server", Msg: err.Error()}
	}
	return rt, err
}
