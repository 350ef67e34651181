package runtimes

import (
	"fmt"

	"rig/internal/gguf"
)

// familyTemplate is a model family's native chat format, used only when the
// GGUF carries no tokenizer.chat_template of its own (an instruction-tuned
// file exported without one). Running such a model on a generic format would
// make it a guest in its own runtime. A pretrained base model, such as the
// Gemma 3 270M set-up provisions, has no chat format at all: studies refuses
// it in chat and sends it plain completions (Request.Prompt), which never
// reach this template.
type familyTemplate struct {
	Name   string   // how the pin records it
	Jinja  string   // for llama-server's --jinja, which reads templates as jinja text
	Ollama string   // Ollama's Go template
	Stop   []string // the family's end-of-turn marker
}

var familyTemplates = map[string]familyTemplate{
	"gemma3": gemmaTemplate, "gemma2": gemmaTemplate, "gemma": gemmaTemplate,
}

var gemmaTemplate = familyTemplate{
	Name: "gemma (family turn format; the GGUF carries none)",
	Jinja: `{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = 'user' %}{% endif %}<start_of_turn>{{ role }}
{{ message['content'] | trim }}<end_of_turn>
{% endfor %}{% if add_generation_prompt %}<start_of_turn>model
{% endif %}`,
	Ollama: `{{- range $i, $m := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq $m.Role "assistant" }}<start_of_turn>model
{{ $m.Content }}{{ if not $last }}<end_of_turn>
{{ end }}
{{- else }}<start_of_turn>user
{{ $m.Content }}<end_of_turn>
{{ if $last }}<start_of_turn>model
{{ end }}
{{- end }}
{{- end }}`,
	Stop: []string{"<end_of_turn>"},
}

// chatTemplate reports whether the model file carries its own chat template,
// and otherwise its family's.
func chatTemplate(model string) (own bool, ft familyTemplate, err error) {
	f, err := gguf.Open(model)
	if err != nil {
		return false, ft, fmt.Errorf("%s: %w: %v", model, ErrModelFile, err)
	}
	if t, ok := f.String("tokenizer.chat_template"); ok && t != "" {
		return true, ft, nil
	}
	ft, ok := familyTemplates[f.Architecture()]
	if !ok {
		return false, ft, fmt.Errorf("%s: the GGUF carries no chat template and rig knows no native format for architecture %q (add one to runtimes/template.go)", model, f.Architecture())
	}
	return false, ft, nil
}
