package tasks

import (
	"fmt"
	"strings"
)

// Completion is how a bank's tasks are put to a model that takes plain text
// rather than chat turns: a pretrained base model, which has no chat
// template and so continues whatever text it is given. An arm whose design
// says "prompt_format": "completion" sends, for each task,
//
//	FewShotPrefix + task prompt + AnswerCue
//
// as the raw prompt, and the answer ends at the first Stop string. The
// worked examples in the prefix are the bank's, written once for every arm
// and every task, so that a base model sees the shape of an answer before it
// gives one; they must not be tasks of the bank (the audit refuses a prefix
// that holds a task's prompt, since the model would be shown its answer).
type Completion struct {
	// FewShotPrefix holds the worked examples, each a prompt written as the
	// tasks' are and followed by AnswerCue and its answer.
	FewShotPrefix string `json:"few_shot_prefix"`
	// AnswerCue follows each task's prompt: where the answer begins, e.g.
	// "\nJSON: ".
	AnswerCue string `json:"answer_cue"`
	// Stop ends the answer, e.g. ["\n\n"] where the examples are separated
	// by a blank line; a base model otherwise goes on to write the next
	// example.
	Stop []string `json:"stop,omitempty"`
}

// CompletionPrompt is the raw prompt a completion-format arm sends for t, and
// false when the bank has no completion block.
func (h Header) CompletionPrompt(t Task) (string, bool) {
	if h.Completion == nil {
		return "", false
	}
	return h.Completion.FewShotPrefix + t.Input.Prompt + h.Completion.AnswerCue, true
}

func (c *Completion) validate(file string, line int) error {
	fail := func(field, msg, fix string) error {
		return &ParseError{File: file, Line: line, Field: "completion." + field, Msg: msg, Fix: fix}
	}
	if strings.TrimSpace(c.FewShotPrefix) == "" {
		return fail("few_shot_prefix", "is empty", "write two or three worked examples, each a prompt as the tasks write them, then answer_cue and the answer; docs/tasks.md shows one")
	}
	if strings.TrimSpace(c.AnswerCue) == "" {
		return fail("answer_cue", "is empty", `say where the answer begins, as the examples do, e.g. "\nJSON: "`)
	}
	if !strings.Contains(c.FewShotPrefix, strings.TrimSpace(c.AnswerCue)) {
		return fail("answer_cue", fmt.Sprintf("%q does not appear in few_shot_prefix", c.AnswerCue), "write the examples' answers after the same cue the tasks end with")
	}
	for i, s := range c.Stop {
		if s == "" {
			return fail(fmt.Sprintf("stop[%d]", i), "is empty", `give the text that ends an answer, e.g. "\n\n", or leave stop out`)
		}
	}
	return nil
}

// fewShotLeaks lists the tasks whose prompt, normalized as the lint does,
// is inside the few-shot prefix: a model shown it would be shown its answer.
func fewShotLeaks(b *Bank) []string {
	c := b.Header.Completion
	if c == nil {
		return nil
	}
	prefix := " " + strings.Join(words(c.FewShotPrefix), " ") + " "
	var ids []string
	for _, t := range b.Tasks {
		if p := strings.Join(words(t.Input.Prompt), " "); p != "" && strings.Contains(prefix, " "+p+" ") {
			ids = append(ids, t.ID)
		}
	}
	return ids
}
