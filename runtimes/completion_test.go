package runtimes

import (
	"context"
	"strings"
	"testing"
)

// A Request with Prompt set reaches the model as plain text: no chat turn
// markers around it, so the runtime counts fewer prompt tokens than for the
// same words sent as a chat turn (llama-server: exactly the tokenizer's
// count of the text), and the stop string ends the answer. Gemma 3 270M as
// provisioned is the base model this format is for.
func TestCompletionPromptIsSentWithNoTemplate(t *testing.T) {
	const text = "Q: What is the capital of France?\nA: Paris\n\nQ: What is the capital of Italy?\nA:"
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			rt := startReal(t, kind, "gemma-3-270m")
			ctx := context.Background()
			base := Request{Sampling: Sampling{Temperature: 0, TopK: 40, TopP: 0.95, Seed: 42}, MaxTokens: 16, TopK: 5}
			comp := base
			comp.CallID, comp.Prompt, comp.Stop = "completion", text, []string{"\n"}
			c, err := rt.Generate(ctx, comp)
			if err != nil {
				t.Fatal(err)
			}
			chat := base
			chat.CallID, chat.Messages = "chat", []Message{{Role: "user", Content: text}}
			h, err := rt.Generate(ctx, chat)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("completion: %d prompt tokens, %q (%s); chat: %d prompt tokens", c.PromptTokens, c.Text, c.StopReason, h.PromptTokens)
			if c.RenderedPrompt != text || strings.Contains(c.RenderedPrompt, "<start_of_turn>") {
				t.Errorf("rendered prompt %q, want the text as sent", c.RenderedPrompt)
			}
			if c.PromptTokens <= 0 || c.PromptTokens >= h.PromptTokens {
				t.Errorf("completion counted %d prompt tokens, chat %d: the completion went through a template", c.PromptTokens, h.PromptTokens)
			}
			if ls, ok := rt.(*LlamaServer); ok {
				ids, err := ls.Tokenize(ctx, text)
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) != c.PromptTokens {
					t.Errorf("llama-server counted %d prompt tokens, the tokenizer gives %d for the text alone", c.PromptTokens, len(ids))
				}
			}
			if strings.Contains(c.Text, "\n") || c.Truncated {
				t.Errorf("the answer %q ran past the stop string (truncated %v)", c.Text, c.Truncated)
			}
		})
	}
}
