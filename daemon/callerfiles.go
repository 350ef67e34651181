package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"rig/internal/peerfile"
	"rig/internal/provision"
	"rig/internal/sizecap"
	"rig/studies"
)

// Files a request names are read with the caller's rights, never the
// daemon's (which is root under the shipped unit). The command line sends
// the design's content itself; every other file a request names (a task
// bank, a licence registry, a model, a speeds table, or the design's path
// from an older command line) is read by the daemon only when it lies under
// the daemon's own home or the provisioned cache, or when the caller could
// read it themselves (package peerfile: their uid and groups against the
// file's mode and ACL and every folder on the way, links resolved by the
// check itself). A call made inside the daemon's process (no socket) reads
// as the daemon.

// callerCred is whose rights a request's files are read with; ok is false
// for a call made inside the daemon's process.
func callerCred(ctx context.Context) (peerfile.Cred, Caller, bool) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return peerfile.Cred{}, Caller{}, false
	}
	return peerfile.Cred{UID: c.UID, GIDs: c.GIDs}, c, true
}

// ownPath resolves path and reports whether it lies under the daemon's home
// or the provisioned cache, the only places the daemon reads as itself. The
// resolved path is what to read: the caller's links were followed once,
// here, and cannot be swapped after.
func (s *Service) ownPath(path string) (string, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false
	}
	for _, root := range []string{s.Home, provision.CacheDir()} {
		if r, err := filepath.EvalSymlinks(root); err == nil && within(r, real) {
			return real, true
		}
	}
	return "", false
}

func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// notYours words a refusal to read a file on a caller's behalf: which file,
// which field named it, and what to do. It never says what is in the file.
func notYours(c Caller, what string, err error) error {
	return fmt.Errorf("%w: %s: %v; the daemon reads a file a request names only if %s could read it (make it readable to you, or name a copy you can read)", ErrForbidden, what, err, c)
}

// readAsCaller reads a file a request names, as the caller could.
func (s *Service) readAsCaller(ctx context.Context, what, path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %s: %q is not an absolute path (the daemon runs in another folder)", ErrBadRequest, what, path)
	}
	// A file read on a caller's behalf is held whole (a design, a speeds
	// table): those are kilobytes, and the design's cap is the larger.
	limit := sizecap.Cap{What: what, Limit: studies.DesignCap.Limit, Fix: "a design or a speeds table is kilobytes: name the file meant"}
	who, c, ok := callerCred(ctx)
	if !ok {
		return limit.ReadFile(path)
	}
	if real, own := s.ownPath(path); own {
		return limit.ReadFile(real)
	}
	f, err := peerfile.Open(path, who)
	if errors.Is(err, peerfile.ErrDenied) {
		return nil, notYours(c, what, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := limit.Check(f, path); err != nil {
		return nil, err
	}
	return limit.Read(f, path)
}

// checkReadable refuses a file the daemon would read by path on the
// caller's behalf and the caller could not read.
func (s *Service) checkReadable(ctx context.Context, what, path string) error {
	who, c, ok := callerCred(ctx)
	if !ok {
		return nil
	}
	if _, own := s.ownPath(path); own {
		return nil
	}
	if err := peerfile.Check(path, who); err != nil {
		if errors.Is(err, peerfile.ErrDenied) {
			return notYours(c, what, err)
		}
		return err
	}
	return nil
}

// checkDesignFiles refuses a design that names, as a model, a task bank or
// its licence registry, a file the caller could not read. Register and
// freeze run it before anything reads those files; a path that does not
// resolve is left to validation, which says so in its own words.
func (sr Studies) checkDesignFiles(ctx context.Context, file string, d *studies.Design, lookup func(string) (string, bool), base, registry string) error {
	if _, _, ok := callerCred(ctx); !ok {
		return nil
	}
	for i, a := range d.Arms {
		if p, err := studies.ModelPath(a.Model.File, lookup, base); err == nil && a.Model.File != "" {
			if err := sr.s.checkReadable(ctx, fmt.Sprintf("%s: arms[%d].model.file", file, i), p); err != nil {
				return err
			}
		}
	}
	for i, jk := range d.JobKinds {
		if strings.TrimSpace(jk.TaskBank) != "" {
			if err := sr.s.checkReadable(ctx, fmt.Sprintf("%s: job_kinds[%d].task_bank", file, i), studies.BankPath(jk.TaskBank, base)); err != nil {
				return err
			}
		}
	}
	if registry != "" {
		if err := sr.s.checkReadable(ctx, file+": the licence registry", registry); err != nil {
			return err
		}
	}
	return nil
}
