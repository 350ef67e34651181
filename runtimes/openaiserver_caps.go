package runtimes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// RequestPins are the pins a generic server is sent with every request,
// and held to when it starts: the sampling, the seed and the stop cap.
type RequestPins struct {
	Sampling Sampling
	StopCap  int
}

// CapCheck is one pin held against what the server reports it used.
// Reported is empty where the server reports nothing for the pin: such a
// pin is sent with every request but cannot be checked, and the receipt
// says so ("not reported"); it is not refused.
type CapCheck struct {
	Pin      string `json:"pin"`
	Sent     string `json:"sent"`
	Reported string `json:"reported,omitempty"`
	Source   string `json:"source,omitempty"` // the endpoint that reported it
	// AtLeast marks a pin the server holds when it reports at least Sent
	// (a slot's context, the slot count), as rig's own llama-server is held.
	AtLeast bool `json:"at_least,omitempty"`
}

// Held reports whether the server reported the pin as sent (or, for an
// AtLeast pin, at least it). A pin not reported is not held and not broken.
func (c CapCheck) Held() bool {
	if c.Reported == "" {
		return false
	}
	if c.AtLeast {
		sent, err1 := strconv.Atoi(c.Sent)
		got, err2 := strconv.Atoi(c.Reported)
		return err1 == nil && err2 == nil && got >= sent
	}
	if c.Sent == c.Reported {
		return true // whole numbers (counts, a seed) are written exactly
	}
	sent, err1 := strconv.ParseFloat(c.Sent, 64)
	got, err2 := strconv.ParseFloat(c.Reported, 64)
	if err1 != nil || err2 != nil || (sent == math.Trunc(sent) && got == math.Trunc(got)) {
		return false
	}
	// A server keeps sampling values as float32.
	return math.Abs(sent-got) <= 1e-6*max(1, math.Abs(sent))
}

// String is the check as the receipt's server_caps pin shows it.
func (c CapCheck) String() string {
	switch {
	case c.Reported == "":
		return fmt.Sprintf("%s %s not reported", c.Pin, c.Sent)
	case c.Held():
		return fmt.Sprintf("%s %s held (%s)", c.Pin, c.Sent, c.Source)
	}
	return fmt.Sprintf("%s %s NOT held: the server reports %s (%s)", c.Pin, c.Sent, c.Reported, c.Source)
}

// CapsSummary joins the checks for the pins and the receipt.
func CapsSummary(checks []CapCheck) string {
	parts := make([]string, len(checks))
	for i, c := range checks {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// serverReport is what a server says it is serving and what it used for
// the last request, gathered from the endpoints that say it: llama-server's
// /props (each slot's context, the slot count) and /slots (the sampling,
// seed and stop cap of the request a slot ran), vLLM's /v1/models
// (max_model_len). llama-cpp-python answers none of them.
type serverReport struct {
	slotContext, slots         int
	slotContextFrom, slotsFrom string
	params                     map[string]float64
	paramsFrom                 string
}

// capsReportParams are the per-request pins a server's report is read for,
// by the name llama-server's /slots gives them.
var capsReportParams = []string{"temperature", "top_k", "top_p", "min_p", "seed", "n_predict"}

// checkCaps sends one request with the pinned sampling, seed and stop cap,
// reads what the server reports it used, and refuses a server that reports
// another value for a pin (ErrPinNotHeld, naming the pin). A pin it does
// not report is returned unchecked, not refused.
func (s *OpenAIServer) checkCaps(ctx context.Context, want RequestPins) ([]CapCheck, error) {
	if err := s.capsProbe(ctx, want); err != nil {
		return nil, fmt.Errorf("openai-server: the request that checks the pins failed: %w", err)
	}
	rep := s.readReport(ctx)
	checks := capChecks(s.cfg, trainedContext(s.cfg.Model), want, rep)
	for _, c := range checks {
		if c.Reported != "" && !c.Held() {
			return checks, fmt.Errorf("openai-server %s: %w: pin %s is %s, and the server reports %s (%s): it does not hold the pin, so its runs would not be held to the same caps as the other arms; start it so that it does (server.command; docs/runtimes.md, openai-server)",
				s.spec.Command[0], ErrPinNotHeld, c.Pin, c.Sent, c.Reported, c.Source)
		}
	}
	return checks, nil
}

// capChecks holds the pins against a report: the slot's context to the
// pinned one (capped at the model's trained length, trained, as a server
// caps it; 0 when unknown), the slots to pins.slots, and each per-request
// pin to the value sent.
func capChecks(cfg Config, trained int, want RequestPins, rep serverReport) []CapCheck {
	wantCtx := cfg.Context
	if trained > 0 && trained < wantCtx {
		wantCtx = trained
	}
	checks := []CapCheck{
		{Pin: "context", Sent: strconv.Itoa(wantCtx), AtLeast: true, Source: rep.slotContextFrom},
		{Pin: "slots", Sent: strconv.Itoa(cfg.slots()), AtLeast: true, Source: rep.slotsFrom},
	}
	if rep.slotContext > 0 {
		checks[0].Reported = strconv.Itoa(rep.slotContext)
	}
	if rep.slots > 0 {
		checks[1].Reported = strconv.Itoa(rep.slots)
	}
	sent := map[string]float64{
		"temperature": want.Sampling.Temperature, "top_k": float64(want.Sampling.TopK), "top_p": orOne(want.Sampling.TopP),
		"min_p": want.Sampling.MinP, "seed": float64(uint32(want.Sampling.Seed)), "n_predict": float64(probeStopCap(want)),
	}
	for _, name := range capsReportParams {
		pin := name
		if name == "n_predict" {
			pin = "stop_cap"
		}
		c := CapCheck{Pin: pin, Sent: formatCap(sent[name])}
		if v, ok := rep.params[name]; ok {
			c.Reported, c.Source = formatCap(v), rep.paramsFrom
		}
		checks = append(checks, c)
	}
	return checks
}

// probeStopCap is the stop cap the probe sends: the pin, or one token
// where the pin is unset (a server reads max_tokens 0 as no cap).
func probeStopCap(want RequestPins) int { return max(want.StopCap, 1) }

// formatCap writes a pin as the server keeps it: a whole number (a count,
// a seed) exactly, a sampling value at float32's precision, so that 0.8
// sent and 0.800000011920929 reported read the same.
func formatCap(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 32)
}

// readReport asks the endpoints that report what a server serves and used;
// an endpoint that is absent or answers otherwise reports nothing.
func (s *OpenAIServer) readReport(ctx context.Context) serverReport {
	var rep serverReport
	var props struct {
		TotalSlots int `json:"total_slots"`
		Defaults   struct {
			SlotContext int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if s.call(ctx, http.MethodGet, "/props", nil, &props) == nil {
		if props.Defaults.SlotContext > 0 {
			rep.slotContext, rep.slotContextFrom = props.Defaults.SlotContext, "/props"
		}
		if props.TotalSlots > 0 {
			rep.slots, rep.slotsFrom = props.TotalSlots, "/props"
		}
	}
	if rep.slotContext == 0 {
		var models struct {
			Data []struct {
				ID          string `json:"id"`
				MaxModelLen int    `json:"max_model_len"`
			} `json:"data"`
		}
		if s.call(ctx, http.MethodGet, "/v1/models", nil, &models) == nil {
			for _, m := range models.Data {
				if m.ID == s.model && m.MaxModelLen > 0 {
					rep.slotContext, rep.slotContextFrom = m.MaxModelLen, "/v1/models max_model_len"
				}
			}
		}
	}
	var slots []struct {
		Context int                        `json:"n_ctx"`
		Task    *int                       `json:"id_task"`
		Params  map[string]json.RawMessage `json:"params"`
	}
	if s.call(ctx, http.MethodGet, "/slots", nil, &slots) == nil {
		// The probe is the latest task the server took: the slot with the
		// highest task id ran it.
		last := -1
		for i, sl := range slots {
			if sl.Task != nil && len(sl.Params) > 0 && (last < 0 || *sl.Task > *slots[last].Task) {
				last = i
			}
		}
		if last >= 0 {
			rep.params, rep.paramsFrom = map[string]float64{}, "/slots"
			for _, name := range capsReportParams {
				var v float64
				if raw, ok := slots[last].Params[name]; ok && json.Unmarshal(raw, &v) == nil {
					rep.params[name] = v
				}
			}
		}
	}
	return rep
}

// capsProbe sends one request with the pins and stops reading once the
// first token has come: the server has taken every pin by then, and the
// answer itself is not needed (the stop cap may be thousands of tokens).
func (s *OpenAIServer) capsProbe(ctx context.Context, want RequestPins) error {
	req := Request{Sampling: want.Sampling, MaxTokens: probeStopCap(want), TopK: 1,
		Messages: []Message{{Role: "user", Content: "Say yes."}}}
	if !s.spec.Speaks(APIChat) {
		req.Messages, req.Prompt = nil, "Yes"
	}
	path, body := s.requestBody(req)
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://server"+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(hreq)
	if err != nil {
		return s.failed(path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, quote(b))
	}
	br := bufio.NewReaderSize(io.LimitReader(resp.Body, maxRuntimeResponseBytes), 64<<10)
	for {
		line, err := readStreamLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return s.failed(path, err)
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if !ok {
			continue
		}
		if data = strings.TrimSpace(data); data == "[DONE]" {
			return nil
		}
		var st streamState
		if err := st.add([]byte(data)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if st.text.Len() > 0 || len(st.steps) > 0 {
			return nil // the first token: the server has the pins
		}
	}
}
