package runtimes

import (
	"context"
	"net/http"
)

// EchoLogprobs is a server's scoring of a given text: the tokens it read
// the text as, where each begins in the text, and the log-probability and
// top-K of each given the text before it (the first token's are null, as
// the OpenAI API has it). Replay reads a kept row's output from it.
type EchoLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	// PromptTokens is the server's count of the text's tokens (its usage),
	// a start-of-text token included where it adds one; CompletionTokens
	// the tokens it generated after the text (0 or 1: the generation may
	// end at once).
	PromptTokens, CompletionTokens int `json:"-"`
}

// Speaks reports whether the server's spec lists api.
func (s *OpenAIServer) Speaks(api string) bool { return s.spec.Speaks(api) }

// Echo asks the server's /v1/completions to score text with `echo` and
// `logprobs` k: the log-probabilities of the text's own tokens, which
// OpenAI's legacy API and llama-cpp-python's server give and llama-server's
// refuses ("Only no echo is supported"). One token is generated after the
// text (a server reads max_tokens 0 as no cap); its entry is the last and
// the caller drops it. Greedy, seed 0: the scored tokens do not depend on
// sampling, only the one generated after them would.
func (s *OpenAIServer) Echo(ctx context.Context, text string, k int) (EchoLogprobs, error) {
	body := map[string]any{"model": s.model, "prompt": text, "echo": true, "logprobs": k,
		"max_tokens": 1, "temperature": 0, "seed": 0, "stream": false}
	s.addRequestFields(body)
	var out struct {
		Choices []struct {
			Logprobs *EchoLogprobs `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := s.call(ctx, http.MethodPost, "/v1/completions", body, &out); err != nil {
		return EchoLogprobs{}, err
	}
	if len(out.Choices) == 0 || out.Choices[0].Logprobs == nil {
		return EchoLogprobs{}, ErrNoLogprobs
	}
	e := *out.Choices[0].Logprobs
	e.PromptTokens, e.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
	return e, nil
}
