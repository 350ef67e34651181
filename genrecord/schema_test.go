package genrecord

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"rig/internal/offload"
)

// TestSchemaMatchesTypes keeps the published schema and the Go types in
// step: same property names, and every property the schema requires is one
// the writer always emits (no omitempty).
func TestSchemaMatchesTypes(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &doc); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	for def, typ := range map[string]reflect.Type{
		"header":   reflect.TypeOf(Header{}),
		"pins":     reflect.TypeOf(Pins{}),
		"row":      reflect.TypeOf(Row{}),
		"step":     reflect.TypeOf(Step{}),
		"alt":      reflect.TypeOf(Alt{}),
		"sampling": reflect.TypeOf(Sampling{}),
		"offload":  reflect.TypeOf(offload.Pin{}),
	} {
		d, ok := doc.Defs[def]
		if !ok {
			t.Errorf("schema has no $defs.%s", def)
			continue
		}
		always := map[string]bool{}
		var fields []string
		for i := 0; i < typ.NumField(); i++ {
			name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
			always[name] = !strings.Contains(opts, "omitempty")
		}
		var props []string
		for p := range d.Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		if !reflect.DeepEqual(fields, props) {
			t.Errorf("$defs.%s properties %v, Go type has %v", def, props, fields)
		}
		for _, r := range d.Required {
			if !always[r] {
				t.Errorf("$defs.%s requires %q but the writer may omit it", def, r)
			}
		}
	}
}
