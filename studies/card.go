package studies

import (
	"fmt"
	"rig/internal/offload"
	"rig/preflight"
	"strings"
)

// Study kinds.
const (
	KindComparison = "comparison"
	// KindCard is the card sub-study: the same models and tasks at several
	// card profiles, where the profile is the treatment.
	KindCard = "card"
)

// cardSeparator joins an arm's name and a card profile's name into the name
// of one cell of a card sub-study, e.g. "smollm2@card-256mib".
const cardSeparator = "@"

// IsCardStudy reports whether the design is a card sub-study.
func (d *Design) IsCardStudy() bool { return d.Kind == KindCard }

// CardProfilesRun are the profiles a card sub-study runs: the reference
// (card_profile) first, then each step-down profile.
func (d *Design) CardProfilesRun() []CardProfile {
	return append([]CardProfile{d.CardProfile}, d.CardProfiles...)
}

// expandCards turns a card sub-study's arms into one arm per arm × profile,
// so that the plan, the receipts, the preflight and the analysis treat each
// cell as an arm of its own. A cell keeps its arm's pins except the context,
// which a step-down profile may replace; at the reference profile it keeps
// its role, elsewhere it is a candidate, and unless the design names pairs,
// each cell is paired with the same arm at the reference profile. Judges are
// not expanded: a judge grades at whatever card it runs.
//
// It is idempotent: a design whose arms already carry their card (a frozen
// snapshot, stored expanded) is left as it is.
func expandCards(d *Design) {
	if !d.IsCardStudy() {
		return
	}
	for _, a := range d.Arms {
		if a.Card != nil {
			return
		}
	}
	profiles := d.CardProfilesRun()
	var arms []Arm
	var pairs []Pair
	for _, a := range d.Arms {
		if a.Role == RoleJudge {
			arms = append(arms, a)
			continue
		}
		for i, p := range profiles {
			c := a
			c.JobKinds = append([]string(nil), a.JobKinds...)
			card := p
			c.Card = &card
			c.BaseArm = a.Name
			c.Name = a.Name + cardSeparator + p.Name
			if p.Context > 0 {
				c.Pins.Context = p.Context
			}
			if i > 0 && c.Role == RoleIncumbent {
				c.Role = RoleCandidate
			}
			arms = append(arms, c)
			if i > 0 && !a.Guest && len(d.Pairs) == 0 {
				pairs = append(pairs, Pair{Challenger: c.Name, Incumbent: a.Name + cardSeparator + profiles[0].Name})
			}
		}
	}
	d.Arms = arms
	if len(d.Pairs) == 0 {
		d.Pairs = pairs
	}
}

// CardOf is the card an arm runs at: its own in a card sub-study, the
// design's otherwise.
func CardOf(d *Design, a Arm) CardProfile {
	if a.Card != nil {
		return *a.Card
	}
	return d.CardProfile
}

// maxCardMiB bounds a declared card: anything above 16 TiB is a typo.
const maxCardMiB = 16 << 20

// cards checks the kind and the card profiles.
func (v *validator) cards() {
	d := v.d
	switch d.Kind {
	case "", KindComparison, KindCard:
	default:
		v.add(KindInvalid, "kind", "%q: write \"comparison\" (or leave it out) or \"card\" for a card sub-study", d.Kind)
	}
	v.cardProfile("card_profile", d.CardProfile)
	if !d.IsCardStudy() {
		if len(d.CardProfiles) > 0 {
			v.add(KindInvalid, "card_profiles", "only a card sub-study runs several profiles: set \"kind\": \"card\", or drop card_profiles (a step-down profile is a different arm, measured in its own sub-study)")
		}
		if d.ConfirmDoesntFit {
			v.add(KindInvalid, "confirm_doesnt_fit", "applies to a card sub-study only: set \"kind\": \"card\" or drop it")
		}
		for i, a := range d.Arms {
			if a.Card != nil || a.BaseArm != "" {
				v.add(KindInvalid, fmt.Sprintf("arms[%d].card", i), "card and base_arm are written by rig for a card sub-study's cells; remove them")
			}
		}
		return
	}
	if n := len(d.CardProfiles); n > MaxCardProfiles {
		v.add(KindInvalid, "card_profiles", "%d step-down profiles: at most %d (each multiplies every arm; measure the rest in another card sub-study)", n, MaxCardProfiles)
	}
	if len(d.CardProfiles) == 0 {
		v.add(KindMissing, "card_profiles", "a card sub-study needs at least one step-down profile beside card_profile (the reference), e.g. [{\"name\": \"card-8gib\", \"memory_mib\": 8192, \"simulated\": true}]")
	}
	seen := map[string]string{d.CardProfile.Name: "card_profile"}
	for i, p := range d.CardProfiles {
		path := fmt.Sprintf("card_profiles[%d]", i)
		v.cardProfile(path, p)
		if first, dup := seen[p.Name]; dup && p.Name != "" {
			v.add(KindDuplicate, path+".name", "%q is already %s (each profile is one treatment; name them apart)", p.Name, first)
		}
		seen[p.Name] = path
	}
}

// cardProfile checks one profile's name and sizes.
func (v *validator) cardProfile(path string, p CardProfile) {
	if v.need(path+".name", p.Name, "name the card profile, e.g. \"card-24gib\"") && !nameRE.MatchString(p.Name) {
		v.add(KindInvalid, path+".name", "%q: use lowercase letters, digits, '.', '-' or '_' (it names the card sub-study's cells)", p.Name)
	}
	switch {
	case p.MemoryMiB <= 0:
		v.add(KindInvalid, path+".memory_mib", "%d: give the card's memory in MiB, above 0 (e.g. 8192 for 8 GiB)", p.MemoryMiB)
	case p.MemoryMiB > maxCardMiB:
		v.add(KindInvalid, path+".memory_mib", "%d MiB is more than 16 TiB: give the card's memory in MiB, not bytes", p.MemoryMiB)
	}
	if o := p.OffloadLayers; o != nil && (*o < 0 || *o > MaxOffloadLayer) {
		v.add(KindInvalid, path+".offload_layers", "%d: must be 0..%d", *o, MaxOffloadLayer)
	}
	if p.Context < 0 || p.Context > MaxContext {
		v.add(KindInvalid, path+".context", "%d: give a context of 1..%d, or leave it out to keep the arms' pin", p.Context, MaxContext)
	}
}

// armPath names an arm in a validation problem: a card sub-study's cell is
// named after the arm the user wrote and its card.
func (v *validator) armPath(i int) string {
	a := v.d.Arms[i]
	if a.Card == nil {
		return fmt.Sprintf("arms[%d]", i)
	}
	// Cells of one arm sit together, so the arm's index in the file is the
	// number of groups up to this one.
	groups, prev := 0, ""
	for j := 0; j <= i; j++ {
		key := v.d.Arms[j].BaseArm
		if key == "" {
			key = "\x00" + v.d.Arms[j].Name
		}
		if j == 0 || key != prev {
			groups++
		}
		prev = key
	}
	return fmt.Sprintf("arms[%d] (at card %s)", groups-1, a.Card.Name)
}

// cellName returns the arm and card of a card sub-study's cell name.
func cellName(name string) (arm, card string, ok bool) {
	i := strings.LastIndex(name, cardSeparator)
	if i < 0 {
		return name, "", false
	}
	return name[:i], name[i+1:], true
}

// CardBytes is the memory of the card an arm runs at, the budget the
// governor holds its runtime's card memory to.
func CardBytes(d *Design, a Arm) uint64 {
	if mib := CardOf(d, a).MemoryMiB; mib > 0 {
		return uint64(mib) << 20
	}
	return 0
}

// PreflightProfile turns the design's card profile and an arm's pins into the
// preflight's profile.
func PreflightProfile(d *Design, a Arm) preflight.Profile {
	card := CardOf(d, a)
	p := preflight.Profile{
		Name:          card.Name,
		CardMemory:    preflight.Size(card.MemoryMiB) * preflight.MiB,
		Context:       a.Pins.Context,
		Quant:         a.Pins.Quant,
		KVType:        "f16",
		OffloadLayers: preflight.OffloadAll,
		Parallel:      a.Pins.SlotCount(), // each slot holds a whole context of KV cache
		Simulated:     card.Simulated,
	}
	if card.OffloadLayers != nil {
		p.OffloadLayers = *card.OffloadLayers
	}
	if o := a.Pins.Offload; o.Backend == offload.BackendCUDA {
		// The arm's offload pin is what the runtime will be held to; the
		// CUDA backend has its own calibration (or is refused without one).
		p.Backend = offload.BackendCUDA
		p.OffloadLayers = preflight.OffloadAll
		if o.GPULayers != offload.AllLayers {
			p.OffloadLayers = o.GPULayers
		}
	}
	return p
}
