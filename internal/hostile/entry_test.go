package hostile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rig/daemon"
	"rig/genrecord"
	"rig/governor"
	"rig/internal/gguf"
	"rig/licences"
	"rig/preflight"
	"rig/studies"
	"rig/tasks"
)

// The corpus kinds, one folder each under testdata/hostile and
// testdata/hostile/valid.
const (
	kindDesigns    = "designs"
	kindRegistries = "registries"
	kindBanks      = "banks"
	kindGGUF       = "gguf"
	kindGenRecords = "genrecords"
	kindGovernor   = "governor"
	kindPolicies   = "policies"
	// kindPolicyFile is a policy read by daemon.LoadPolicy; not a corpus
	// folder, since committed files cannot carry the ownership it checks.
	kindPolicyFile = "policy-file"
)

var kinds = []string{kindDesigns, kindRegistries, kindBanks, kindGGUF, kindGenRecords, kindGovernor, kindPolicies}

// corpusDir is testdata/hostile at the repository root, from this package.
const corpusDir = "../../testdata/hostile"

// validGGUF names the small committed models a corpus design's model
// variables expand to, so a design is refused for what is in it and never
// for a missing model (and the test needs no provisioned models).
var validGGUF = map[string]string{
	"SMOLLM2_GGUF": "smollm2-q4_1.gguf",
	"GEMMA3_GGUF":  "gemma3-q4_k_m.gguf",
	// The demos' candidate: SmolLM2 requantized to Q8_0.
	"SMOLLM2_REQUANT_Q8_0_GGUF": "smollm2-q8_0.gguf",
}

// designLookup expands a design's ${NAME} model references to the committed
// valid models.
func designLookup(name string) (string, bool) {
	f, ok := validGGUF[name]
	if !ok {
		return "", false
	}
	p, err := filepath.Abs(filepath.Join(corpusDir, "valid", kindGGUF, f))
	return p, err == nil
}

// open reads path as a file of kind through the entry point a user's file
// of that kind reaches, as far as rig reads it before acting on it. It
// returns nil only when the file is accepted.
func open(kind, path string) error {
	ctx := context.Background()
	switch kind {
	case kindDesigns:
		// As `rig study register` validates it (daemon.Studies.Register).
		_, err := studies.LoadDesign(ctx, path, studies.ValidateOptions{File: path, Lookup: designLookup, Quant: studies.GGUFQuant})
		return err
	case kindRegistries:
		_, err := licences.LoadRegistry(path)
		return err
	case kindBanks:
		b, err := tasks.LoadBank(path)
		if err != nil {
			return err
		}
		if b == nil {
			return errors.New("LoadBank returned neither a bank nor an error")
		}
		return nil
	case kindGGUF:
		// As `rig preflight MODEL` and the daemon's preflight read it:
		// header, hyperparameters, then the prediction at a real profile.
		f, err := gguf.Open(path)
		if err != nil {
			return err
		}
		cal, err := preflight.DefaultCalibration()
		if err != nil {
			return fmt.Errorf("calibration: %w", err)
		}
		p := preflight.Profile{Name: "hostile", CardMemory: 8 * preflight.GiB, Context: 4096, Parallel: 1, Simulated: true, OffloadLayers: preflight.OffloadAll}
		for _, rt := range []string{preflight.RuntimeLlamaServer, preflight.RuntimeOllama} {
			if _, err := preflight.Predict(f, p, rt, cal); err != nil {
				return err
			}
		}
		return nil
	case kindGenRecords:
		_, _, err := genrecord.ReadAll(path)
		return err
	case kindGovernor:
		_, err := governor.LoadConfig(path)
		return err
	case kindPolicies:
		// As the daemon reads its policy at start and on SIGHUP, after the
		// file's ownership checks (which the committed files cannot carry).
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = daemon.ParsePolicy(path, b)
		return err
	case kindPolicyFile:
		// As the daemon loads its policy file, ownership checks and all:
		// only for files the test writes itself (the big inputs).
		_, err := daemon.LoadPolicy(path)
		return err
	}
	return fmt.Errorf("unknown corpus kind %q", kind)
}

// markers are the words an error uses to point inside a file when it does
// not give the file's name: a line, a byte offset, a field.
var markers = []string{"line ", "offset", "byte ", "field", "key ", "column"}

// locates reports whether msg tells the user where the problem is: the
// file's base name, or a line, offset or field marker.
func locates(msg, path string) bool {
	if strings.Contains(msg, filepath.Base(path)) {
		return true
	}
	for _, m := range markers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// exists is for the generator: whether a path is a regular file.
func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
