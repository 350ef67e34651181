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
		N int `json:"n"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"grants":"x"}`, `field "grants" holds a JSON string where an array is expected`},
		{`{"grants":[{"roles":{}}]}`, `field "grants.roles" holds a JSON object where an array is expected`},
		{`{"n":1.5}`, `field "n" holds a JSON number 1.5 where a whole number in range is expected`},
		{`[1]`, `holds a JSON array where an object is expected`},
		{`{"n":`, `unexpected end of JSON input`},
		{`{"n":x}`, `not valid JSON at byte 6`},
	} {
		err := json.Unmarshal([]byte(c.in), &v)
		got := Message(err)
		if !strings.Contains(got, c.want) || strings.Contains(got, "Go ") || strings.Contains(got, "struct") {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
}
