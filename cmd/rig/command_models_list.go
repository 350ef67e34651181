package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"rig/internal/ollamalib"
	"rig/internal/provision"
	"rig/internal/sizecap"
	"rig/runtimes"
	"rig/studies"
)

// nameable is what a design can name as an arm's model, by where it lies.
type nameable struct {
	Provisioned []nameableFile `json:"provisioned"`
	Ollama      ollamaTags     `json:"ollama"`
	Folder      *modelsFolder  `json:"folder,omitempty"`
}

// nameableFile is one GGUF a design names by file: Ref is what to write in
// model.file.
type nameableFile struct {
	Ref    string `json:"ref"`
	Name   string `json:"name,omitempty"`
	Path   string `json:"path"`
	Quant  string `json:"quant,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error,omitempty"`
}

type ollamaTags struct {
	Library string            `json:"library"`
	Tags    []ollamalib.Entry `json:"tags"`
}

type modelsFolder struct {
	Dir   string         `json:"dir"`
	Files []nameableFile `json:"files"`
}

func newModelsCommand() *cobra.Command {
	models := &cobra.Command{
		Use:   "models",
		Short: "List the models a design can name",
	}
	models.AddCommand(newModelsListCommand())
	return models
}

func newModelsListCommand() *cobra.Command {
	var dir string
	var hash, asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the provisioned GGUFs, your Ollama tags and the GGUFs in a folder",
		Long: `list prints what an arm's "model" can name, and how to write it:

  provisioned   the GGUFs make setup fetched (installed.env under $RIG_CACHE):
                "file": "${SMOLLM2_GGUF}"
  ollama        the tags in your own Ollama library ($OLLAMA_MODELS, else
                ~/.ollama/models), read with your rights, no Ollama running:
                "ollama_tag": "qwen2.5:7b-instruct"
                A tag whose weights are not a GGUF on this machine (a cloud
                model, a partial pull) is listed with the reason a design
                cannot name it.
  folder        with --dir, every .gguf file under that folder:
                "file": "/models/qwen2.5-7b-instruct-q4_k_m.gguf"

Each line gives the quant read from the GGUF header, the size and the sha256
(an Ollama blob is named by its digest; a folder's files are hashed only with
--sha256, since freeze hashes whatever a design names anyway).

Examples:
  rig models list
  rig models list --dir ~/models --sha256
  OLLAMA_MODELS=/srv/ollama/models rig models list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := listNameable(dir, hash)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(n)
			}
			printNameable(cmd.OutOrStdout(), n)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "a models folder: list every .gguf file under it")
	cmd.Flags().BoolVar(&hash, "sha256", false, "hash each file of --dir (slow for large files)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

// listNameable gathers the three sources. A source that is absent (nothing
// provisioned, no Ollama library) is an empty list, not an error.
func listNameable(dir string, hash bool) (nameable, error) {
	var n nameable
	if in, err := provision.Load(); err == nil {
		n.Provisioned = provisionedFiles(in)
	} else if !errors.Is(err, provision.ErrNotProvisioned) {
		return n, err
	}
	lib, err := ollamalib.Find(os.Getenv)
	if err != nil {
		return n, err
	}
	n.Ollama.Library = lib.Dir
	if n.Ollama.Tags, err = lib.List(); err != nil {
		return n, fmt.Errorf("ollama library %s: %w", lib.Dir, err)
	}
	for i, e := range n.Ollama.Tags {
		if e.Model != nil {
			if q, err := studies.GGUFQuant(e.Model.Blob); err == nil {
				n.Ollama.Tags[i].Model.Quant = q
			}
		}
	}
	if dir != "" {
		if n.Folder, err = folderFiles(dir, hash); err != nil {
			return n, err
		}
	}
	return n, nil
}

func provisionedFiles(in provision.Installed) []nameableFile {
	var out []nameableFile
	for _, set := range []map[string]provision.Model{in.Models, in.OtherQuants} {
		for _, m := range set {
			if m.Path == "" || m.Key == "" {
				continue
			}
			f := nameableFile{Ref: "${" + m.Key + "}", Name: m.Name, Path: m.Path, Quant: m.Quant, SHA256: m.SHA256}
			if st, err := os.Stat(m.Path); err == nil {
				f.Size = st.Size()
			} else {
				f.Error = "missing: run make setup"
			}
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out
}

// folderFiles lists the .gguf files under dir; a file that is not a GGUF
// is listed with why.
func folderFiles(dir string, hash bool) (*modelsFolder, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	folder := &modelsFolder{Dir: abs}
	err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(strings.ToLower(d.Name()), ".gguf") {
			return nil
		}
		f := nameableFile{Ref: path, Path: path}
		if st, err := os.Stat(path); err == nil {
			f.Size = st.Size()
		}
		if f.Quant, err = studies.GGUFQuant(path); err != nil {
			f.Error = err.Error()
		} else if hash {
			if f.SHA256, err = runtimes.FileSHA256(path); err != nil {
				f.Error = err.Error()
			}
		}
		folder.Files = append(folder.Files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--dir %s: %w", dir, err)
	}
	return folder, nil
}

func printNameable(w io.Writer, n nameable) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, `provisioned (name one as "file": "${KEY}"):`)
	if len(n.Provisioned) == 0 {
		fmt.Fprintln(tw, "  none: run make setup")
	}
	for _, f := range n.Provisioned {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Ref, f.Quant, sizeOf(f.Size), shortSum(f.SHA256), f.Error)
	}
	fmt.Fprintf(tw, "\nollama tags in %s (name one as \"ollama_tag\": \"TAG\"):\n", n.Ollama.Library)
	if len(n.Ollama.Tags) == 0 {
		fmt.Fprintln(tw, "  none (set OLLAMA_MODELS to another library, or ollama pull a model)")
	}
	for _, e := range n.Ollama.Tags {
		if e.Model == nil {
			fmt.Fprintf(tw, "  %s\t-\t-\t-\tcannot be named: %s\n", e.Tag, e.Refused)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", e.Tag, e.Model.Quant, sizeOf(e.Model.Size), shortSum(e.Model.SHA256))
	}
	if n.Folder != nil {
		fmt.Fprintf(tw, "\nGGUF files under %s (name one as \"file\": \"PATH\"):\n", n.Folder.Dir)
		if len(n.Folder.Files) == 0 {
			fmt.Fprintln(tw, "  none")
		}
		for _, f := range n.Folder.Files {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Path, f.Quant, sizeOf(f.Size), shortSum(f.SHA256), f.Error)
		}
	}
	tw.Flush()
}

func sizeOf(n int64) string {
	if n == 0 {
		return "-"
	}
	return sizecap.Bytes(n)
}

func shortSum(s string) string {
	if len(s) < 12 {
		return "-"
	}
	return "sha256:" + s[:12]
}
