package fidelity

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Token is what the scorer reports for one scored token.
type Token struct {
	// KL is KL(reference || arm) in nats over the full vocabulary.
	KL float64 `json:"kl"`
	// RefTop and ArmTop are each model's highest-logit token.
	RefTop int `json:"ref_top"`
	ArmTop int `json:"arm_top"`
	// RefLogprob and ArmLogprob are the log-probabilities each model gives
	// the text's next token (the reference's token, in a study).
	RefLogprob float64 `json:"ref_logprob"`
	ArmLogprob float64 `json:"arm_logprob"`
}

// Agrees says whether the two models' top tokens are the same.
func (t Token) Agrees() bool { return t.RefTop == t.ArmTop }

// scorerHeader is the scorer's first line: its context, vocabulary and the
// CPU features it computed with.
type scorerHeader struct {
	NCtx, NVocab int
	SystemInfo   string
	// Busy is what the scorer spent past loading, from its last line.
	Busy Busy
}

// maxLine bounds one line of the scorer's answer: a segment's header or a
// token's six fields are far below it.
const maxLine = 1 << 16

// parseScores reads the kl mode's answer for segs, in their order: a
// "ready" line, then per segment "seg ID N" and N token lines, or an
// "error ID MESSAGE" line. The answer comes from a contained process, so
// every field is checked.
func parseScores(r io.Reader, segs []Segment) (scorerHeader, [][]Token, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var h scorerHeader
	if !sc.Scan() {
		return h, nil, fmt.Errorf("the scorer's answer is empty (%v)", sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) < 3 || f[0] != "ready" {
		return h, nil, fmt.Errorf("the scorer's first line is %.80q, not ready N_CTX N_VOCAB", sc.Text())
	}
	var err1, err2 error
	h.NCtx, err1 = strconv.Atoi(f[1])
	h.NVocab, err2 = strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || h.NCtx < 1 || h.NVocab < 1 {
		return h, nil, fmt.Errorf("the scorer's first line %.80q has no context and vocabulary", sc.Text())
	}
	h.SystemInfo = strings.Join(f[3:], " ")
	out := make([][]Token, len(segs))
	for i, s := range segs {
		toks, err := parseSegment(sc, i, s, h.NVocab)
		if err != nil {
			return h, nil, err
		}
		out[i] = toks
	}
	busy, err := parseDone(sc)
	h.Busy = busy
	return h, out, err
}

// Busy is what a scorer pass took past loading: wall time, and processor
// time over every thread, which a busy machine's waiting does not inflate.
type Busy struct {
	Wall time.Duration `json:"wall_ns"`
	CPU  time.Duration `json:"cpu_ns"`
}

// parseDone reads the scorer's last line, "done MS CPU_MS".
func parseDone(sc *bufio.Scanner) (Busy, error) {
	if !sc.Scan() {
		return Busy{}, fmt.Errorf("the scorer's answer has no closing done line (%v)", sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) != 3 || f[0] != "done" {
		return Busy{}, fmt.Errorf("the scorer's last line is %.80q, not done MS CPU_MS", sc.Text())
	}
	var b Busy
	for i, d := range []*time.Duration{&b.Wall, &b.CPU} {
		ms, err := strconv.ParseFloat(f[1+i], 64)
		if err != nil || !(ms >= 0) || ms > 1e12 {
			return Busy{}, fmt.Errorf("the scorer's last line %.80q has no times", sc.Text())
		}
		*d = time.Duration(ms * float64(time.Millisecond))
	}
	return b, nil
}

func parseSegment(sc *bufio.Scanner, i int, s Segment, nvocab int) ([]Token, error) {
	id := segID(i)
	if !sc.Scan() {
		return nil, fmt.Errorf("the scorer's answer ends before segment %s (%s) (%v)", id, s.Unit, sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) >= 2 && f[0] == "error" && f[1] == id {
		return nil, fmt.Errorf("the scorer refused segment %s (%s): %s", id, s.Unit, strings.Join(f[2:], " "))
	}
	if len(f) != 3 || f[0] != "seg" || f[1] != id || f[2] != strconv.Itoa(s.Scored()) {
		return nil, fmt.Errorf("segment %s (%s): the scorer answered %.80q, want \"seg %s %d\"", id, s.Unit, sc.Text(), id, s.Scored())
	}
	toks := make([]Token, 0, s.Scored())
	for j := range s.Scored() {
		if !sc.Scan() {
			return nil, fmt.Errorf("segment %s (%s): the answer ends at token %d of %d", id, s.Unit, j, s.Scored())
		}
		t, err := parseToken(sc.Text(), j, nvocab)
		if err != nil {
			return nil, fmt.Errorf("segment %s (%s): %w", id, s.Unit, err)
		}
		toks = append(toks, t)
	}
	return toks, nil
}

func parseToken(line string, j, nvocab int) (Token, error) {
	f := strings.Fields(line)
	bad := func(what string) (Token, error) {
		return Token{}, fmt.Errorf("token %d: %s in %.80q", j, what, line)
	}
	if len(f) != 6 || f[0] != strconv.Itoa(j) {
		return bad("want I KL REF_TOP ARM_TOP REF_LOGP ARM_LOGP")
	}
	var t Token
	var errs [5]error
	t.KL, errs[0] = strconv.ParseFloat(f[1], 64)
	t.RefTop, errs[1] = strconv.Atoi(f[2])
	t.ArmTop, errs[2] = strconv.Atoi(f[3])
	t.RefLogprob, errs[3] = strconv.ParseFloat(f[4], 64)
	t.ArmLogprob, errs[4] = strconv.ParseFloat(f[5], 64)
	for _, err := range errs {
		if err != nil {
			return bad("a field is not a number")
		}
	}
	// Rounding can take a KL of identical distributions a hair below zero
	// (llama-perplexity shows the same); anything further is a broken answer.
	if math.IsNaN(t.KL) || math.IsInf(t.KL, 0) || t.KL < -1e-4 {
		return bad("KL is not a finite non-negative number")
	}
	if t.RefTop < 0 || t.RefTop >= nvocab || t.ArmTop < 0 || t.ArmTop >= nvocab {
		return bad("a top token is outside the vocabulary")
	}
	if !(t.RefLogprob <= 0) || !(t.ArmLogprob <= 0) || math.IsInf(t.RefLogprob, 0) || math.IsInf(t.ArmLogprob, 0) {
		return bad("a log-probability is not finite and at most 0")
	}
	return t, nil
}

// segID is the id a segment goes to the scorer under.
func segID(i int) string { return "s" + strconv.Itoa(i) }

// parseTokenized reads the tokenize mode's answer.
func parseTokenized(r io.Reader) (Tokenized, error) {
	br := bufio.NewReader(r)
	head, err := br.ReadString('\n')
	if err != nil {
		return Tokenized{}, fmt.Errorf("the tokenizer's answer has no header line: %w", err)
	}
	f := strings.Fields(head)
	if len(f) != 4 || f[0] != "tokens" {
		return Tokenized{}, fmt.Errorf("the tokenizer's header is %.80q, not tokens N ADD_BOS BOS", head)
	}
	n, err1 := strconv.Atoi(f[1])
	bos, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || n < 0 || (f[2] != "0" && f[2] != "1") {
		return Tokenized{}, fmt.Errorf("the tokenizer's header %.80q is malformed", head)
	}
	t := Tokenized{AddBOS: f[2] == "1", BOS: bos, IDs: make([]int, 0, min(n, 1<<20))}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<30)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		id, err := strconv.Atoi(sc.Text())
		if err != nil || id < 0 {
			return Tokenized{}, fmt.Errorf("the tokenizer's answer has %.20q where a token id belongs", sc.Text())
		}
		t.IDs = append(t.IDs, id)
	}
	if err := sc.Err(); err != nil {
		return Tokenized{}, err
	}
	if len(t.IDs) != n {
		return Tokenized{}, fmt.Errorf("the tokenizer said %d tokens and gave %d", n, len(t.IDs))
	}
	return t, nil
}

// parseGenerated reads the gen mode's answer: "ready ...", "seg ID N" per
// segment, then "done MS".
func parseGenerated(r io.Reader, segs []Segment) (Busy, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "ready ") {
		return Busy{}, fmt.Errorf("the scorer's gen answer does not start with ready (%v)", sc.Err())
	}
	for i, s := range segs {
		want := fmt.Sprintf("seg %s %d", segID(i), s.Scored())
		if !sc.Scan() || sc.Text() != want {
			return Busy{}, fmt.Errorf("segment %s (%s): the scorer's gen answer is %.80q, want %q", segID(i), s.Unit, sc.Text(), want)
		}
	}
	return parseDone(sc)
}
