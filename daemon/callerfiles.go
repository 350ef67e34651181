package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"rig/internal/peerfile"
	"rig/internal/provision"
	"rig/internal/sizecap"
	"rig/run"
	"rig/studies"
)

// Files a request names are read with the caller's rights, never the
// daemon's (which is root under the shipped unit). The command line sends
// the design's content itself; every other file a request names (a task
// bank and the audit records beside it, a licence registry, a model, a
// speeds table, or the design's path from an older command line) is read by
// the daemon only when it lies under the daemon's own home or the
// provisioned cache, or when the caller could read it themselves (package
// peerfile: their uid and groups against the file's mode and ACL and every
// folder on the way, links resolved by the check itself). A call made
// inside the daemon's process (no socket) reads as the daemon.
//
// Every read goes through a descriptor peerfile judged (callerOpen), never
// through the path again after a check: a caller who owns a folder on the
// way could otherwise swap a link between the check and the read, and the
// daemon would parse or hash a file only root may read and quote it in its
// error (issue 43, TestRedTeamLinkSwapDuringRegister). checkDesignFiles
// still checks every file first, so that the common refusal names the
// design's field before anything is read; the opener is what makes the
// reads safe.

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
// which field named it (when the reader knows), and what to do. It never
// says what is in the file.
func notYours(c Caller, what string, err error) error {
	if what != "" {
		what += ": "
	}
	return fmt.Errorf("%w: %s%v; the daemon reads a file a request names only if %s could read it (make it readable to you, or name a copy you can read)", ErrForbidden, what, err, c)
}

// callerOpen is os.Open with the rights of the caller ctx carries, for the
// readers of the files a request names (banks, audit records, registries,
// model headers and hashes): each open walks the path again as the caller
// and returns the very descriptor it judged, so a link swapped after any
// earlier check cannot send the read elsewhere. A file under the daemon's
// home or the provisioned cache is opened as the daemon (ownPath); a file
// the caller may not read is ErrForbidden, naming the file and the fix; a
// missing one stays fs.ErrNotExist (readers that take a missing record as
// empty still can), said only where the caller could have seen it. A call
// made inside the daemon's process opens as the daemon.
func (s *Service) callerOpen(ctx context.Context) func(path string) (*os.File, error) {
	who, c, ok := callerCred(ctx)
	if !ok {
		return os.Open
	}
	return func(path string) (*os.File, error) {
		if real, own := s.ownPath(path); own {
			return os.Open(real)
		}
		f, err := peerfile.OpenAny(path, who)
		if errors.Is(err, peerfile.ErrDenied) && !errors.Is(err, fs.ErrNotExist) {
			return nil, notYours(c, "", err)
		}
		return f, err
	}
}

// callerEnv is the run environment for work done on a request's behalf
// (register, freeze): its assets hash models and read banks and their audit
// records through callerOpen.
func (s *Service) callerEnv(ctx context.Context) (run.Env, error) {
	env, err := s.runEnv()
	if err != nil {
		return run.Env{}, err
	}
	env.Open = s.callerOpen(ctx)
	return env, nil
}

// callerValidate is the validation options for a design a request names:
// model headers (quant, chat template, tokenizer) are read through callerOpen.
func (s *Service) callerValidate(ctx context.Context, file, base string, lookup func(string) (string, bool)) studies.ValidateOptions {
	open := s.callerOpen(ctx)
	return studies.ValidateOptions{File: file, Lookup: lookup, BaseDir: base, Quant: studies.GGUFQuantWith(open), Format: studies.GGUFFormatWith(open), Vocab: studies.GGUFVocabWith(open)}
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

// checkReadable refuses a file the daemon will read on the caller's behalf
// and the caller could not read, naming the field that named it. It is the
// early, well-worded refusal; the reads themselves go through callerOpen.
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
	if afterCallerCheck != nil {
		afterCallerCheck(path)
	}
	return nil
}

// afterCallerCheck, set only by tests, runs when a file a request names has
// passed the caller's check and before anything reads it: the moment a
// caller who owns a folder on the way would swap a link
// (TestRedTeamLinkSwapDuringRegister).
var afterCallerCheck func(path string)

// checkDesignFiles refuses a design that names, as a model, a task bank or
// its licence registry, a file the caller could not read. Register and
// freeze run it before anything reads those files, and then read them
// through callerOpen, never by path; a path that does not resolve is left to
// validation, which says so in its own words.
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
