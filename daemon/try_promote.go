package daemon

import (
	"context"
	"fmt"
	"sort"

	"rig/api"
	"rig/run"
	"rig/studies"
)

// Promoting a try: rig study register DESIGN --from-try ID registers exactly
// what the try ran. The design as read must hash to the try's design hash,
// and every digest the try recorded (banks, models, runtime builds, licence
// registries) must be the same now; anything that changed since is a stale
// asset naming the asset and both digests, and nothing is registered.

// fromTry reads the try a register request names (nil when it names none),
// holds the design as read to the try's design hash, and, when asked, puts
// the try's discordance in the design's power section.
func (sr Studies) fromTry(req RegisterRequest, d *studies.Design) (*api.TryRecord, *studies.TryOrigin, error) {
	if req.FromTry == "" {
		if req.PilotFromTry {
			return nil, nil, fmt.Errorf("%w: --pilot-from-try needs --from-try ID (the try to take the discordance from)", ErrBadRequest)
		}
		return nil, nil, nil
	}
	rec, err := sr.s.Tries().Record(req.FromTry)
	if err != nil {
		return nil, nil, err
	}
	h, err := studies.DesignHash(d)
	if err != nil {
		return nil, nil, err
	}
	if h != rec.DesignHash {
		return nil, nil, &studies.StaleAssetError{Asset: "design " + req.DesignFile, Want: rec.DesignHash, Got: h, Field: "design hash",
			Msg: fmt.Sprintf("was sha256:%s in try %s and is sha256:%s now (the design was edited since the try: try it again, then register from the new try)", rec.DesignHash, rec.ID, h)}
	}
	origin := &studies.TryOrigin{ID: rec.ID, DesignHash: rec.DesignHash}
	if req.PilotFromTry {
		best := -1
		for i, p := range rec.Pilot.Pairs {
			if p.Discordant > 0 && (best < 0 || p.Discordance > rec.Pilot.Pairs[best].Discordance) {
				best = i
			}
		}
		if best < 0 {
			return nil, nil, fmt.Errorf("%w: --pilot-from-try: no pair of try %s split a task, so it has no discordance to size the study with (try more tasks: rig try %s --tasks N)", ErrBadRequest, rec.ID, req.DesignFile)
		}
		p := rec.Pilot.Pairs[best]
		// The largest pair's: the study is sized for the pair hardest to see.
		d.Power.PilotDiscordance = p.Discordance
		origin.PilotDiscordance = p.Discordance
		origin.PilotPair = fmt.Sprintf("%s vs %s in %s: %d of %d tasks split", p.Candidate, p.Baseline, p.JobKind, p.Discordant, p.Tasks)
	}
	return &rec, origin, nil
}

// checkTried compares what the design's assets hash to now (the banks read
// as a try reads them, so that a changed bank is named as changed before any
// audit check refuses it) with the try's digests.
func (sr Studies) checkTried(ctx context.Context, file string, d *studies.Design, tried *api.TryRecord, env run.Env, resolve studies.ResolveOptions, licAssets studies.AssetSet) error {
	now, err := studies.Fingerprint(ctx, d, env.TryAssets(), resolve)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for k, v := range licAssets {
		now[k] = v
	}
	keys := make([]string, 0, len(tried.Assets))
	for k := range tried.Assets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, got := tried.Assets[k], now[k]
		if got == want {
			continue
		}
		if got == "" {
			got = "missing"
		}
		return fmt.Errorf("%s: %w", file, &studies.StaleAssetError{Asset: describeAsset(k, d, resolve.BaseDir), Want: want, Got: got, Field: "sha256",
			Msg: fmt.Sprintf("was %s in try %s and is %s now (it changed since the try, so the study would not be what was tried: try again, then register from the new try)", want, tried.ID, got)})
	}
	return nil
}

// describeAsset names an asset key for a person: a bank by its job kind and
// file.
func describeAsset(key string, d *studies.Design, base string) string {
	for _, jk := range d.JobKinds {
		if key == "bank:"+jk.Name {
			return fmt.Sprintf("%s (task bank %s)", key, studies.BankPath(jk.TaskBank, base))
		}
	}
	return key
}
