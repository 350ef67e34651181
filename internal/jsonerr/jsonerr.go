// Package jsonerr words encoding/json's decode errors for the people who wrote
// the file: the JSON field and the JSON type it wants, never Go's type names
// ("Go struct field Header.kind of type string"), and never more of the file
// than the span that is wrong (Span). It is for messages about user files; it
// does not decode anything itself.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSpan is the most characters of a file's text an error quotes: enough to
// find a misspelt key or a wrong value, too few to carry the file's lines
// back to whoever named it. A file fed to a parser it was never meant for
// (a password file as a design) turns every line into an "unknown field".
const MaxSpan = 40

// Span is a key or value read from a user's file as an error may show it: as
// it is when it is short and plain (letters, digits, _ - . and spaces), else
// as Quote shows it.
func Span(s string) string {
	plain := utf8.RuneCountInString(s) <= MaxSpan && s != "" && strings.TrimSpace(s) == s
	for _, r := range s {
		if !plain {
			break
		}
		plain = unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-. ", r)
	}
	if plain {
		return s
	}
	return Quote(s)
}

// Quote is s quoted, with control characters escaped, and cut to MaxSpan
// characters with its full length said.
func Quote(s string) string {
	if utf8.RuneCountInString(s) <= MaxSpan {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", string([]rune(s)[:MaxSpan]), len(s))
}

// unknownField is encoding/json's error for a key DisallowUnknownFields
// refuses; the key is quoted whole, however long.
var unknownField = regexp.MustCompile(`^json: unknown field "((?:[^"\\]|\\.)*)"$`)

// Kind says in JSON's words what a Go kind takes.
func Kind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer, reflect.Interface:
		return "an object"
	case reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "a whole number in range"
	}
}

// Message words a decode error: the byte offset of a syntax error, the field
// and wanted type of a type error, and the decoder's own words otherwise
// (without its "json: " prefix).
func Message(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if k := te.Type.Kind(); (k == reflect.Float32 || k == reflect.Float64) && strings.HasPrefix(te.Value, "number ") {
			// A number a float cannot hold: 1e999999.
			where := "the value"
			if te.Field != "" {
				where = fmt.Sprintf("field %q", te.Field)
			}
			return fmt.Sprintf("%s holds the JSON %s, too large to be a number rig can hold", where, Quote(te.Value))
		}
		if te.Field == "" {
			return fmt.Sprintf("holds a JSON %s where %s is expected", te.Value, Kind(te.Type.Kind()))
		}
		return fmt.Sprintf("field %q holds a JSON %s where %s is expected", te.Field, te.Value, Kind(te.Type.Kind()))
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		if key, uerr := strconv.Unquote(`"` + m[1] + `"`); uerr == nil {
			return "unknown field " + Quote(key)
		}
		return "unknown field (its name is not printable)"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
