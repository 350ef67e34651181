package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"rig/internal/cgroup"
	"rig/preflight"
	"rig/runtimes"
)

// ollamaStore is a private Ollama models directory with the bench models
// imported once, outside any reservation: importing copies the GGUF into
// Ollama's blob store, and that copy is not part of running the model.
type ollamaStore struct {
	dir   string            // holds models/ and the import runs' work directories
	blobs map[string]string // model path → its file in the blob store
}

func (s *ollamaStore) models() string { return filepath.Join(s.dir, "models") }

func (s *ollamaStore) close() { os.RemoveAll(s.dir) }

// importOllama imports every bench model into a private store by starting
// Ollama on it through its launcher, once per model.
func (b *bench) importOllama(ctx context.Context) (*ollamaStore, error) {
	dir, err := os.MkdirTemp("", "rig-bench-ollama-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	st := &ollamaStore{dir: dir, blobs: map[string]string{}}
	build := b.builds[preflight.RuntimeOllama]
	for i, m := range b.opts.Models {
		sum := m.SHA256
		if sum == "" {
			if sum, err = runtimes.FileSHA256(m.Path); err != nil {
				st.close()
				return nil, fmt.Errorf("bench: %w", err)
			}
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		rt, err := build.Start(ictx, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 2048,
			Threads: benchThreads, WorkDir: filepath.Join(dir, fmt.Sprintf("import-%d", i)), ModelStore: st.models(), NoSandbox: b.opts.NoSandbox})
		if err != nil {
			cancel()
			st.close()
			return nil, fmt.Errorf("bench: importing %s into Ollama: %w", m.Path, err)
		}
		rt.Stop(context.Background())
		cancel()
		st.blobs[m.Path] = filepath.Join(st.models(), "blobs", "sha256-"+sum)
	}
	return st, nil
}

// measureOllama starts Ollama through its launcher in a fresh reservation
// (`ollama serve` and its runner, the whole tree inside) on the store the
// model was imported into, so the launcher's import finds the blob there and
// copies nothing; the launcher loads the model at the row's context and KV
// type. One raw completion follows; the row gets the group's peak, Ollama's
// own size for the loaded model (/api/ps) and the allocations its log reports.
func (b *bench) measureOllama(ctx context.Context, r *Row, cfg runtimes.Config) error {
	if err := warmFile(b.store.blobs[cfg.Model]); err != nil {
		return err
	}
	res, err := cgroup.Reserve(ctx, uint64(b.opts.Limit))
	if err != nil {
		return err
	}
	defer res.Close()
	cfg.CgroupDir, cfg.ModelStore = res.Dir(), b.store.models()
	rt, err := b.builds[preflight.RuntimeOllama].Start(ctx, cfg)
	if err != nil {
		r.Measured = reservationPeak(res)
		r.Logged = ollamaBuffers(readLog(cfg.WorkDir, preflight.RuntimeOllama))
		return fmt.Errorf("ollama did not start (oom kills %d): %w", oomKills(res), err)
	}
	defer rt.Stop(context.Background())
	o := rt.(*runtimes.Ollama)
	r.Stack = rt.Pins().Stack
	// Raw: the prompt goes in as it is, so the template cannot change its length.
	_, gerr := o.GenerateRaw(ctx, benchPrompt(cfg.Context), runtimes.Sampling{}, 16, 0)
	log := readLog(cfg.WorkDir, preflight.RuntimeOllama)
	r.Logged = ollamaBuffers(log)
	if size, err := o.LoadedSize(ctx); err == nil {
		r.Own = preflight.Size(size)
	} else {
		b.opts.Logger.Warn("ollama /api/ps", "err", err)
	}
	if r.Own == 0 {
		r.Own = ollamaTotal(log) // the same number, from the log
	}
	peak, perr := res.Peak()
	r.Measured = preflight.Size(peak)
	if gerr != nil {
		return fmt.Errorf("ollama generate (oom kills %d): %w", oomKills(res), gerr)
	}
	return perr
}

var ollamaTotalLine = regexp.MustCompile(`msg="total memory" size="([0-9.]+ [KMGT]?i?B)"`)

// ollamaTotal is the last "total memory" Ollama logged for a load: its own
// estimate of the loaded model, the size /api/ps reports.
func ollamaTotal(log string) preflight.Size {
	m := ollamaTotalLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return 0
	}
	s, _ := preflight.ParseSize(m[len(m)-1][1])
	return s
}

var ollamaDeviceLine = regexp.MustCompile(`msg="(model weights|kv cache|compute graph)" device=\S+ size="([0-9.]+ [KMGT]?i?B)"`)

// ollamaBuffers reads what Ollama's log says it allocated: llama.cpp's own
// buffer lines when the model runs on the llama.cpp runner, else the last
// "model weights", "kv cache" and "compute graph" lines of Ollama's engine
// (it logs them once per load step; the last is the committed load).
func ollamaBuffers(log string) Buffers {
	if b := parseBuffers(log); b.Model > 0 {
		return b
	}
	var b Buffers
	last := ""
	for _, m := range ollamaDeviceLine.FindAllStringSubmatch(log, -1) {
		s, err := preflight.ParseSize(m[2])
		if err != nil {
			continue
		}
		if m[1] == "model weights" && last != "" && last != m[1] {
			b = Buffers{} // a new load step starts with its weights, one line per device
		}
		last = m[1]
		switch m[1] {
		case "model weights":
			b.Model += s
		case "kv cache":
			b.KV += s
		case "compute graph":
			b.Compute += s
		}
	}
	return b
}
