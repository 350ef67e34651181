package studies

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// A job kind's reference arm: the arm whose kept outputs every other arm of
// the job kind is held to token by token, the fidelity measure
// (docs/fidelity.md). The design names it (JobKind.Reference); this file
// says which arms are measured against it, checks the names, and, where the
// model files resolve, that every measured arm shares the reference's
// tokenizer. A design without a reference hashes as it did before the field
// existed (it is omitted when empty).

// KindVocabDiffers is a measured arm whose model file's tokenizer is not the
// reference's: their next-token distributions are over different token ids,
// and no divergence between them means anything.
const KindVocabDiffers ProblemKind = "tokenizer_differs"

// VocabReader reads the hash of a model file's tokenizer (every
// tokenizer.ggml.* key and value of its GGUF header); GGUFVocab is the one
// register and freeze use.
type VocabReader func(path string) (string, error)

// GGUFVocab reads a model file's tokenizer hash from its GGUF header.
func GGUFVocab(path string) (string, error) { return GGUFVocabWith(os.Open)(path) }

// GGUFVocabWith is GGUFVocab opening the file with open (see
// GGUFQuantWith).
func GGUFVocabWith(open func(string) (*os.File, error)) VocabReader {
	return func(path string) (string, error) {
		f, err := ggufHeader(open, path)
		if err != nil {
			return "", err
		}
		return f.VocabHash()
	}
}

// FidelityGroup is one reference and the arms held to it: in a comparison,
// a job kind's arms; in a card sub-study, the job kind's cells at one
// profile, held to the reference's cell at that profile.
type FidelityGroup struct {
	JobKind string
	// Profile is the card profile's name; "" outside a card sub-study.
	Profile string
	// Reference and Arms index Design.Arms. Arms are the measured arms in
	// design order, the reference left out: the job kind's arms that are
	// neither judges, guests (which never rank) nor openai-server arms
	// (whose model is not a GGUF file the scorer can load).
	Reference int
	Arms      []int
}

// FidelityGroups lists the job kind's fidelity groups; none when it names no
// reference, or the reference is not one of its arms (validation says so).
func (d *Design) FidelityGroups(jk JobKind) []FidelityGroup {
	if jk.Reference == "" {
		return nil
	}
	var out []FidelityGroup
	for _, i := range d.ArmsFor(jk.Name) {
		a := d.Arms[i]
		if a.Name != jk.Reference && a.BaseArm != jk.Reference {
			continue
		}
		g := FidelityGroup{JobKind: jk.Name, Reference: i}
		if a.Card != nil {
			g.Profile = a.Card.Name
		}
		for _, j := range d.ArmsFor(jk.Name) {
			b := d.Arms[j]
			if j == i || b.Guest || b.Runtime.OpenAIServer() || !sameProfile(a, b) {
				continue
			}
			g.Arms = append(g.Arms, j)
		}
		out = append(out, g)
	}
	return out
}

func sameProfile(a, b Arm) bool {
	if a.Card == nil || b.Card == nil {
		return a.Card == nil && b.Card == nil
	}
	return a.Card.Name == b.Card.Name
}

// references checks each job kind's reference: an arm of the job kind that
// produces rows the scorer can read (a ranked arm answering in its runtime
// directly), with at least one arm to hold to it.
func (v *validator) references() {
	for i, jk := range v.d.JobKinds {
		if jk.Reference == "" {
			continue
		}
		p := fmt.Sprintf("job_kinds[%d].reference", i)
		a := v.d.Arm(jk.Reference)
		if a == nil {
			// In a card sub-study the design names the arm as written; its
			// cells carry it as base_arm.
			if c := slices.IndexFunc(v.d.Arms, func(c Arm) bool { return c.BaseArm == jk.Reference }); c >= 0 {
				a = &v.d.Arms[c]
			}
		}
		switch {
		case a == nil:
			v.add(KindUnknownRef, p, "%q is not an arm of this design (known: %s)", jk.Reference, v.armNames())
			continue
		case a.Card != nil && a.Name == jk.Reference:
			v.add(KindInvalid, p, "%q is one profile's cell; name the arm as written, %q (each profile's cells are held to the reference's cell at the same profile)", jk.Reference, a.BaseArm)
			continue
		case a.Role == RoleJudge:
			v.add(KindInvalid, p, "%q is a judge: it grades the job kind and keeps no answers of its own to the tasks (name one of the job kind's candidates or its incumbent)", jk.Reference)
			continue
		case !a.RunsJobKind(jk.Name):
			v.add(KindInvalid, p, "arm %q does not run job kind %q (add the job kind to its job_kinds, or name an arm that runs it)", jk.Reference, jk.Name)
			continue
		case a.Guest:
			v.add(KindInvalid, p, "%q is a guest arm: it never ranks, so it cannot be the model the others are held to (name one of the job kind's ranked arms)", jk.Reference)
		case a.Runtime.Aider():
			v.add(KindInvalid, p, "arm %q runs %q: its kept output is a repository made over several calls, not one answer the other arms can be scored on (name an arm on \"llama-server\" or \"ollama\")", jk.Reference, a.Runtime)
		case a.Runtime.OpenAIServer():
			v.add(KindInvalid, p, "arm %q runs %q: its model is not a GGUF file the fidelity scorer can load (name an arm on \"llama-server\" or \"ollama\")", jk.Reference, a.Runtime)
		}
		measured := false
		for _, g := range v.d.FidelityGroups(jk) {
			measured = measured || len(g.Arms) > 0
		}
		if !measured {
			v.add(KindInvalid, p, "no other arm of job kind %q is measured against %q (add a candidate on llama-server or ollama with the same tokenizer, or remove reference)", jk.Name, jk.Reference)
		}
	}
}

// referenceVocabs refuses a measured arm whose model file's tokenizer is not
// its reference's. Files that do not resolve are skipped: the quant check
// (or freeze) names an unset reference.
func (v *validator) referenceVocabs(ctx context.Context, opts ValidateOptions) {
	hashes := map[string]string{} // model path → tokenizer hash; "" unreadable
	read := func(a Arm) (path, hash string, ok bool) {
		if a.Model.File == "" {
			return "", "", false
		}
		path, err := ModelPath(a.Model.File, opts.Lookup, opts.BaseDir)
		if err != nil {
			return "", "", false
		}
		if h, seen := hashes[path]; seen {
			return path, h, h != ""
		}
		h, err := opts.Vocab(path)
		if err != nil {
			v.add(KindUnreadable, v.armPath(v.armIndex(a.Name))+".model.file", "cannot read the tokenizer of %s: %v (the fidelity measure against the job kind's reference needs it; check the path)", path, err)
		}
		hashes[path] = h
		return path, h, h != ""
	}
	said := map[[2]string]bool{} // a card sub-study's cells of one arm say it once
	for i, jk := range v.d.JobKinds {
		for _, g := range v.d.FidelityGroups(jk) {
			if ctx.Err() != nil {
				return
			}
			refPath, refHash, ok := read(v.d.Arms[g.Reference])
			if !ok {
				continue
			}
			for _, j := range g.Arms {
				a := v.d.Arms[j]
				path, hash, ok := read(a)
				name := cmp.Or(a.BaseArm, a.Name)
				key := [2]string{jk.Name, name}
				if !ok || hash == refHash || said[key] {
					continue
				}
				said[key] = true
				v.add(KindVocabDiffers, fmt.Sprintf("job_kinds[%d].reference", i),
					"arm %q (%s) has tokenizer sha256:%.12s, the reference %q (%s) has sha256:%.12s: fidelity compares next-token distributions token id by token id, so every arm measured against the reference must be the same model family converted with the same tokenizer (name a reference of that family, move arm %q to another job kind with job_kinds, or remove reference)",
					name, path, hash, jk.Reference, refPath, refHash, name)
			}
		}
	}
}

// armIndex is the index of the named arm in the design.
func (v *validator) armIndex(name string) int {
	return slices.IndexFunc(v.d.Arms, func(a Arm) bool { return a.Name == name })
}

// FidelityCostPrefix begins the dry run's row of a job kind's fidelity step
// ("fidelity:JOBKIND"); an arm's name cannot hold ':', so no arm is taken
// for it.
const FidelityCostPrefix = "fidelity:"

// priceFidelity adds each job kind's fidelity step: for every task, the
// reference's kept text (prompt and output) prefill-scored through the
// reference and through each measured arm. The scorer runs the reference's
// pass again for each arm (both models loaded in one process), so a task
// costs 2 × (prompt + output) tokens per measured arm, each model's at its
// prompt rate in the speed table (the scorer runs the same library's
// prefill), plus both models' loads per arm and profile. Output is the
// reference's pilot mean, or its stop cap.
func priceFidelity(d *Design, p *Plan, speeds SpeedTable, prompt func(TrialKey) int, costs map[string]*ArmCost, order *[]string) {
	for _, jk := range d.JobKinds {
		row := FidelityCostPrefix + jk.Name
		for _, g := range d.FidelityGroups(jk) {
			ref := d.Arms[g.Reference]
			rs, ok := speeds[ref.Name]
			if !ok {
				continue
			}
			var tokens []float64 // per task: the reference's prompt and output
			for _, t := range p.Trials {
				if t.Key.Arm != ref.Name || t.Key.JobKind != jk.Name || t.Key.Repeat != 1 {
					continue
				}
				in := DefaultPromptTokens
				if prompt != nil {
					in = prompt(t.Key)
				}
				out := rs.MeanOutputTokens
				if out == 0 {
					out = float64(ref.Pins.StopCap)
				}
				tokens = append(tokens, float64(in)+out)
			}
			if len(tokens) == 0 {
				continue
			}
			c, ok := costs[row]
			if !ok {
				c = &ArmCost{Arm: row, Source: "prefill at each model's prompt rate"}
				costs[row] = c
				*order = append(*order, row)
			}
			for _, i := range g.Arms {
				as, ok := speeds[d.Arms[i].Name]
				if !ok {
					continue
				}
				refSecs, armSecs := rs.LoadSeconds, as.LoadSeconds
				for _, n := range tokens {
					refSecs += n / rs.PromptTokensPerSec
					armSecs += n / as.PromptTokensPerSec
				}
				c.Trials += len(tokens)
				c.Loads += 2
				c.WallTime += time.Duration((refSecs + armSecs) * float64(time.Second))
				c.EnergyWh += (refSecs*rs.Watts + armSecs*as.Watts) / 3600
			}
		}
	}
}

// fidelityNote says how a fidelity row was priced, once, under the table.
const fidelityNote = "fidelity: per task, the reference's kept prompt and output prefill-scored through the reference and through each measured arm (no generation); the reference's pass runs again for each arm, so each arm costs 2 × tasks × (prompt + output) tokens, at each model's prompt rate, with both models loaded once per arm"
