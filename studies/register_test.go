package studies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeLicences blocks the registry ids it lists.
type fakeLicences struct{ blocked map[string]string }

func (f fakeLicences) Check(_ context.Context, items []Item) (LicenceRecord, error) {
	for _, it := range items {
		if why, ok := f.blocked[it.RegistryID]; ok {
			return LicenceRecord{}, fmt.Errorf("%s (%s, %s): %s", it.Name, it.RegistryID, it.Use, why)
		}
	}
	return LicenceRecord{}, nil
}

func TestRegister(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	registered := map[string]bool{}
	deps := RegisterDeps{Licences: fakeLicences{}, Assets: fx.assets, Exists: func(n string) bool { return registered[n] }}
	in := RegisterInput{Design: fx.design, Key: "reg-1", Actor: "ana", At: at(0), Resolve: ResolveOptions{Lookup: fx.opts.Lookup}}

	reg, replayed, err := Register(ctx, in, deps)
	if err != nil || replayed || reg == nil {
		t.Fatalf("Register = %v, %v, %v", reg, replayed, err)
	}
	if reg.Lifecycle.State != Draft || len(reg.Assets) == 0 || reg.Request.Result != fx.design.Name {
		t.Errorf("registration %+v", reg)
	}
	registered[reg.Name] = true

	// Same key, same request: the existing study, nothing new.
	in.Prev = &reg.Request
	again, replayed, err := Register(ctx, in, deps)
	if err != nil || !replayed || again != nil {
		t.Errorf("replay = %v, %v, %v; want replayed", again, replayed, err)
	}
	// New key, same name: refused.
	in.Prev, in.Key = nil, "reg-2"
	if _, _, err := Register(ctx, in, deps); !errors.Is(err, ErrNameTaken) {
		t.Errorf("second register with the same name = %v, want ErrNameTaken", err)
	}
	// Same key, another design: conflict.
	other := *fx.design
	other.Repeats = 3
	in.Design, in.Key, in.Prev = &other, "reg-1", &reg.Request
	if _, _, err := Register(ctx, in, deps); !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("key reused with another body = %v, want ErrIdempotencyConflict", err)
	}
}

func TestRegisterFailsClosed(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	in := RegisterInput{Design: fx.design, Key: "k", Actor: "ana", At: at(0), Resolve: ResolveOptions{Lookup: fx.opts.Lookup}}
	none := func(string) bool { return false }

	_, _, err := Register(ctx, in, RegisterDeps{Assets: fx.assets, Exists: none})
	if !errors.Is(err, ErrNotWired) {
		t.Errorf("no licence checker = %v, want ErrNotWired", err)
	}
	banned := fakeLicences{blocked: map[string]string{"smollm2-135m-instruct-q8_0": "training on outputs: banned"}}
	_, _, err = Register(ctx, in, RegisterDeps{Licences: banned, Assets: fx.assets, Exists: none})
	if err == nil || !strings.Contains(err.Error(), "design.json: items:") || !strings.Contains(err.Error(), "smollm2-135m-instruct-q8_0") {
		t.Errorf("banned use = %v, want it named", err)
	}
}
