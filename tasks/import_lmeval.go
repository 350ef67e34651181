package tasks

import (
	"encoding/json"
	"fmt"
)

// lmevalSample is one line of lm-evaluation-harness's --log_samples file.
// The log holds much more (responses, metric values, hashes); an import
// needs the document, its id, the target and the prompt lm-eval rendered.
type lmevalSample struct {
	DocID     json.RawMessage            `json:"doc_id"`
	Doc       map[string]json.RawMessage `json:"doc"`
	Target    json.RawMessage            `json:"target"`
	Arguments json.RawMessage            `json:"arguments"`
}

// lmeval reads an lm-eval samples file, one JSON object a line.
func (im *importer) lmeval(data []byte) []importRow {
	var rows []importRow
	eachJSONRow(data, im, "sample", func(line int, raw []byte) {
		var s lmevalSample
		// A log, not a format of rig's: its other fields are left alone.
		if err := json.Unmarshal(raw, &s); err != nil {
			im.errs.add(lineErr(im.file, line, "sample", err, "an lm-eval samples file has one JSON object a line, as --log_samples writes it"))
			return
		}
		if r, ok := im.lmevalRow(line, s); ok {
			rows = append(rows, r)
		}
	})
	return rows
}

func (im *importer) lmevalRow(line int, s lmevalSample) (importRow, bool) {
	r := importRow{line: line}
	ok := true
	bad := func(field, msg, fix string) { im.fail(&r, field, msg, fix); ok = false }
	id, isScalar := scalarString(s.DocID)
	if !isScalar {
		bad("doc_id", "is missing or not a number", "import the file lm-eval wrote with --log_samples")
	}
	r.id = id
	if s.Doc == nil {
		bad("doc", "is missing", "import the file lm-eval wrote with --log_samples")
	}
	if f := im.o.PromptField; f != "" {
		p, found := scalarString(s.Doc[f])
		if !found {
			bad("doc."+f, "is missing or not a string (named by --prompt-field)", "name a doc field holding the question, or leave --prompt-field out to use the prompt lm-eval rendered")
		}
		r.prompt = p
	} else {
		p, msg := lmevalPrompt(s.Arguments)
		if msg != "" {
			bad("arguments", msg, "rig imports generate_until tasks, whose one request holds the prompt; or give --prompt-field naming a doc field")
		}
		r.prompt = p
	}
	targets, msg := stringOrList(s.Target)
	if msg != "" {
		bad("target", msg, "every sample needs its answer")
	}
	if ok {
		var err error
		if r.grader, r.key, err = im.o.answerKey(targets); err != nil {
			bad("target", err.Error(), "")
		}
	}
	r.field = func(name string) (string, bool) { return scalarString(s.Doc[name]) }
	return r, ok
}

// lmevalPrompt is the prompt of a sample's one request. lm-eval writes
// arguments as {"gen_args_0": {"arg_0": PROMPT, "arg_1": {...}}} (0.4) or
// as [[PROMPT, {...}]] (earlier versions).
func lmevalPrompt(raw json.RawMessage) (string, string) {
	var byName map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byName); err == nil && byName != nil {
		if len(byName) != 1 {
			return "", fmt.Sprintf("holds %d requests (a loglikelihood task)", len(byName))
		}
		for _, args := range byName {
			if p, ok := scalarString(args["arg_0"]); ok {
				return p, ""
			}
		}
		return "", "has no prompt in arg_0"
	}
	var list [][]json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil && list != nil {
		if len(list) != 1 || len(list[0]) == 0 {
			return "", fmt.Sprintf("holds %d requests (a loglikelihood task)", len(list))
		}
		if p, ok := scalarString(list[0][0]); ok {
			return p, ""
		}
	}
	return "", "is missing or has no prompt"
}
