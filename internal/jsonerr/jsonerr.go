// Package jsonerr words encoding/json's decode errors for the people who wrote
// the file: the JSON field and the JSON type it wants, never Go's type names
// ("Go struct field Header.kind of type string"). It is for messages about
// user files; it does not decode anything itself.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

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
		if te.Field == "" {
			return fmt.Sprintf("holds a JSON %s where %s is expected", te.Value, Kind(te.Type.Kind()))
		}
		return fmt.Sprintf("field %q holds a JSON %s where %s is expected", te.Field, te.Value, Kind(te.Type.Kind()))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
