package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMessageSpeaksJSON(t *testing.T) {
	var v struct {
		Grants []struct {
			Roles []string `json:"roles"`
		} `json:"grants"`
		N int     `json:"n"`
		F float64 `json:"f"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"grants":"x"}`, `field "grants" holds a JSON string where an array is expected`},
		{`{"grants":[{"roles":{}}]}`, `field "grants.roles" holds a JSON object where an array is expected`},
		{`{"n":1.5}`, `field "n" holds a JSON number 1.5 where a whole number in range is expected`},
		{`[1]`, `holds a JSON array where an object is expected`},
		{`{"n":`, `unexpected end of JSON input`},
		{`{"n":x}`, `not valid JSON at byte 6`},
		{`{"f":1e999999}`, `field "f" holds the JSON "number 1e999999", too large to be a number rig can hold`},
	} {
		err := json.Unmarshal([]byte(c.in), &v)
		got := Message(err)
		if !strings.Contains(got, c.want) || strings.Contains(got, "Go ") || strings.Contains(got, "struct") || strings.Contains(got, "float64") {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
}

// TestMessageQuotesOnlyTheWrongSpan: a file that is not JSON of the expected
// shape (a password file named as a policy or a config) is refused naming
// the key, cut short, never the text around it.
func TestMessageQuotesOnlyTheWrongSpan(t *testing.T) {
	var v struct {
		N int `json:"n"`
	}
	secret := "root:$6$SECRETHASHSECRETHASHSECRETHASH:19000:0:99999:7:::"
	dec := json.NewDecoder(strings.NewReader(`{"` + secret + `": 1}`))
	dec.DisallowUnknownFields()
	got := Message(dec.Decode(&v))
	if strings.Contains(got, secret) || !strings.Contains(got, secret[:MaxSpan]) || !strings.Contains(got, "unknown field") {
		t.Errorf("message %q: want the key cut to %d characters", got, MaxSpan)
	}
	dec = json.NewDecoder(strings.NewReader(`{"extra": 1}`))
	dec.DisallowUnknownFields()
	if got := Message(dec.Decode(&v)); got != `unknown field "extra"` {
		t.Errorf("a short key: %q", got)
	}
	for in, want := range map[string]string{
		"arms":        "arms",
		"SECRET LINE": "SECRET LINE",
		"a\nb":        `"a\nb"`,
		"root:$6$abc": `"root:$6$abc"`,
		secret:        `"` + secret[:MaxSpan] + `"… (57 bytes)`,
		"ééééééééééééééééééééééééééééééééééééééééé": `"` + strings.Repeat("é", MaxSpan) + `"… (82 bytes)`,
	} {
		if got := Span(in); got != want {
			t.Errorf("Span(%q) = %s, want %s", in, got, want)
		}
	}
}
