package daemon

import (
	"context"
	"errors"
	"io"
	"io/fs"

	"rig/api"
	"rig/receipts"
	"rig/report"
	"rig/ui"
)

// UIInfo is `rig ui`'s reply: the workspace's URL, with a single-use token.
type UIInfo = api.UIInfo

// UI starts the read-only workspace on loopback, once per daemon, and
// returns a URL to open it. Each URL's token opens it once (see ui.Server),
// so a later call returns the same workspace under a fresh token.
func (rp Reports) UI(ctx context.Context) (UIInfo, error) {
	rp.s.mu.Lock()
	defer rp.s.mu.Unlock()
	if rp.s.ui != nil {
		url, err := rp.s.ui.NewURL()
		return UIInfo{URL: url}, err
	}
	srv, err := ui.Start(context.WithoutCancel(ctx), uiSource(rp))
	if err != nil {
		return UIInfo{}, err
	}
	rp.s.ui = srv
	rp.s.Log.Info("workspace started", "addr", srv.Addr)
	return UIInfo{URL: srv.URL, Started: true}, nil
}

// uiSource is what the workspace reads, through the same methods as the
// command line's status and report.
type uiSource struct{ s *Service }

func (u uiSource) Studies() ([]string, error) {
	names, err := u.s.Studies().List()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

func (u uiSource) Progress(ctx context.Context, name string) (ui.Progress, error) {
	execs, err := u.s.executions(ctx, name)
	if err != nil {
		return ui.Progress{}, err
	}
	p := ui.Progress{Study: name, Capped: map[string]int{}, Governor: "no governor wired in this daemon"}
	for _, e := range execs {
		p.Executions = append(p.Executions, api.ExecInfo(e))
	}
	if st, err := u.s.store(name); err == nil {
		for _, e := range execs {
			rs, _ := st.Receipts(ctx, e.ID)
			for _, r := range rs {
				if r.Outcome == receipts.Capped {
					p.Capped[e.ID]++
				}
			}
		}
	}
	if g, ok := u.s.Gates.(interface{ MayStart() (bool, string) }); ok {
		if ok, why := g.MayStart(); ok {
			p.Governor = "ready"
		} else {
			p.Governor = "held: " + why
		}
	}
	return p, nil
}

func (u uiSource) Report(ctx context.Context, name string, w io.Writer) error {
	in, err := u.s.Reports().readInputs(ctx, name, "")
	if err != nil {
		return err
	}
	a, err := analyse(ctx, in)
	if err != nil {
		return err
	}
	return report.WriteHTML(w, u.s.Reports().reportData(in, a))
}
