// Package jsonkeys renames the member names of a JSON document that
// encoding/json wrote from a Go value, guided by the value's type: the
// members of an object that encodes a struct are field names and are
// renamed; the keys of a map are data and are not. Every other byte is
// kept, so a document can be moved between two spellings of its field
// names (a frozen legacy one and the current one) without touching a value.
//
// It is not a JSON encoder or decoder: it reads no value and writes none.
package jsonkeys

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// Rename returns data, a JSON value of type t as encoding/json writes it,
// with the name of every member of an object that encodes a struct
// replaced by rename(name). rename returns a name it does not know as it
// is: a table, not Snake, which would also rename an untagged field's Go
// name ("NoTag"). A member is matched to its field by its name or by its
// new name, so the walk finds the nested types in either spelling. Map
// keys, values, member order and white space are kept byte for byte; so is
// everything under a type that marshals itself (json.Marshaler,
// encoding.TextMarshaler) or an interface, whose shape the type does not
// give.
func Rename(data []byte, t reflect.Type, rename func(string) string) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errors.New("jsonkeys: not a JSON document")
	}
	w := walker{data: data, rename: rename, fields: map[reflect.Type]map[string]reflect.Type{}, opaque: map[reflect.Type]bool{}, keys: map[string]key{}}
	end, err := w.value(0, t)
	if err != nil {
		return nil, err
	}
	if skipSpace(data, end) != len(data) {
		return nil, fmt.Errorf("jsonkeys: data after the value at byte %d", end)
	}
	out := make([]byte, 0, len(data))
	at := 0
	for _, e := range w.edits {
		out = append(out, data[at:e.from]...)
		out = append(out, e.with...)
		at = e.to
	}
	return append(out, data[at:]...), nil
}

// Snake is name in snake_case: an underscore before each upper-case letter,
// which is lowered ("pBestBar" is "p_best_bar", "ttftP50Ms" is
// "ttft_p50_ms"). A name with no upper-case letter is returned as it is.
func Snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// edit replaces data[from:to] with with.
type edit struct {
	from, to int
	with     []byte
}

// walker keeps what it learnt of each type and each member name, as a
// document repeats both (one object per trial).
type walker struct {
	data   []byte
	rename func(string) string
	edits  []edit
	fields map[reflect.Type]map[string]reflect.Type
	opaque map[reflect.Type]bool
	keys   map[string]key // by the name's bytes in the document
}

// key is a member name, its new name, and the new name's JSON (nil when
// the name stays).
type key struct {
	name, renamed string
	quoted        []byte
}

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// opaque is a type whose JSON the type's fields do not give.
func opaque(t reflect.Type) bool {
	if t == nil || t.Kind() == reflect.Interface {
		return true
	}
	for _, m := range []reflect.Type{marshaler, textMarshaler} {
		if t.Implements(m) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(m)) {
			return true
		}
	}
	return false
}

// value walks the value that starts at or after i and returns where it ends.
func (w *walker) value(i int, t reflect.Type) (int, error) {
	i = skipSpace(w.data, i)
	for t != nil && t.Kind() == reflect.Pointer && !w.isOpaque(t) {
		t = t.Elem()
	}
	if w.isOpaque(t) {
		return skipValue(w.data, i), nil
	}
	switch c := w.data[i]; {
	case c == '{' && t.Kind() == reflect.Struct:
		f, ok := w.fields[t]
		if !ok {
			f = fieldsOf(t)
			w.fields[t] = f
		}
		return w.object(i, f, nil)
	case c == '{' && t.Kind() == reflect.Map:
		return w.object(i, nil, t.Elem())
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		return w.array(i, t.Elem())
	}
	return skipValue(w.data, i), nil
}

// object walks the object at i: a struct's when fields is not nil (its
// member names renamed), else a map's with values of type elem.
func (w *walker) object(i int, fields map[string]reflect.Type, elem reflect.Type) (int, error) {
	i = skipSpace(w.data, i+1)
	if w.data[i] == '}' {
		return i + 1, nil
	}
	for {
		from, to := i, skipString(w.data, i)
		vt := elem
		if fields != nil {
			k, err := w.key(from, to)
			if err != nil {
				return 0, err
			}
			var ok bool
			if vt, ok = fields[k.name]; !ok {
				vt = fields[k.renamed]
			}
			if k.quoted != nil {
				w.edits = append(w.edits, edit{from, to, k.quoted})
			}
		}
		i = skipSpace(w.data, to)
		if w.data[i] != ':' {
			return 0, fmt.Errorf("jsonkeys: want ':' at byte %d", i)
		}
		end, err := w.value(i+1, vt)
		if err != nil {
			return 0, err
		}
		i = skipSpace(w.data, end)
		switch w.data[i] {
		case ',':
			i = skipSpace(w.data, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, fmt.Errorf("jsonkeys: want ',' or '}' at byte %d", i)
		}
	}
}

// key is the member name data[from:to] (quoted), renamed.
func (w *walker) key(from, to int) (key, error) {
	if k, ok := w.keys[string(w.data[from:to])]; ok {
		return k, nil
	}
	var k key
	if err := json.Unmarshal(w.data[from:to], &k.name); err != nil {
		return key{}, fmt.Errorf("jsonkeys: member name at byte %d: %w", from, err)
	}
	k.renamed = w.rename(k.name)
	if k.renamed != k.name {
		q, err := json.Marshal(k.renamed)
		if err != nil {
			return key{}, err
		}
		k.quoted = q
	}
	w.keys[string(w.data[from:to])] = k
	return k, nil
}

func (w *walker) isOpaque(t reflect.Type) bool {
	o, ok := w.opaque[t]
	if !ok {
		o = opaque(t)
		w.opaque[t] = o
	}
	return o
}

func (w *walker) array(i int, elem reflect.Type) (int, error) {
	i = skipSpace(w.data, i+1)
	if w.data[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := w.value(i, elem)
		if err != nil {
			return 0, err
		}
		i = skipSpace(w.data, end)
		switch w.data[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return 0, fmt.Errorf("jsonkeys: want ',' or ']' at byte %d", i)
		}
	}
}

// fieldsOf is the JSON member names of a struct's fields and their types,
// with the fields of an embedded struct that has no name of its own
// promoted as encoding/json promotes them (an outer field wins).
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	for _, et := range embedded {
		for name, ft := range fieldsOf(et) {
			if _, ok := out[name]; !ok {
				out[name] = ft
			}
		}
	}
	return out
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string that opens at i.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the end of the value at i, which Rename has checked
// is valid JSON.
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			i = skipString(data, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}
