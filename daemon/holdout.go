package daemon

import (
	"fmt"
	"os"
	"strings"
	"time"

	"rig/studies"
	"rig/tasks"
)

// The seed rule: once a decided study has used a bank version, that
// version's hold-out flags are fixed. Decide records each frozen bank it
// used in the bank's used-versions file (studies.BankUsedFile), which
// tasks.FlipHoldout reads to refuse a flip in place; Freeze refuses a bank
// whose split was changed in place anyway (by hand) after a decision.

// markBanksUsed records that the decided study used each of its snapshot's
// banks at the hash it froze. The split recorded is the bank file's when it
// still has that hash; otherwise none is recorded, and any later content of
// the version is refused at freeze.
func markBanksUsed(study string, snap *studies.Snapshot, at time.Time) error {
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBank(fb.Path)
		if err != nil {
			return fmt.Errorf("recording that study %s used the %s bank %s (its hold-out split is fixed by the decision): %w (restore the bank file the study froze)", study, fb.JobKind, fb.Path, err)
		}
		v := tasks.UsedVersion{JobKind: b.Header.JobKind, BankVersion: b.Header.BankVersion, BankHash: fb.SHA256, Study: study, DecidedAt: at}
		if b.Hash == fb.SHA256 {
			v.Holdout = b.HoldoutIDs()
		}
		if err := tasks.MarkUsed(studies.BankUsedFile(fb.Path), v); err != nil {
			return fmt.Errorf("recording that study %s used the %s bank %s: %w", study, fb.JobKind, fb.Path, err)
		}
	}
	return nil
}

// checkHoldoutSplits refuses a snapshot whose bank is a version a decided
// study used, with its hold-out flags changed in place since: a
// *studies.StaleAssetError naming the bank, the field and the fix. open
// opens the bank and its used-versions record (freeze's caller's rights).
func checkHoldoutSplits(open func(string) (*os.File, error), snap *studies.Snapshot) error {
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBankWith(open, fb.Path)
		if err != nil {
			return err
		}
		file := studies.BankUsedFile(fb.Path)
		used, err := tasks.LoadUsedWith(open, file)
		if err != nil {
			return fmt.Errorf("job kind %s: the used-versions record beside its task bank %s: %w", fb.JobKind, fb.Path, err)
		}
		ch, changed := used.SplitChanged(b)
		if !changed {
			continue
		}
		var what string
		if ch.Used.Holdout == nil {
			what = fmt.Sprintf("its content changed since (sha256 %s then, %s now) and the use recorded no split, so the hold-out flags cannot be shown unchanged", studies.Short(ch.Used.BankHash), studies.Short(b.Hash))
		} else {
			var parts []string
			if len(ch.Added) > 0 {
				parts = append(parts, "now flags "+strings.Join(ch.Added, ", ")+" hold-out")
			}
			if len(ch.Removed) > 0 {
				parts = append(parts, "no longer flags "+strings.Join(ch.Removed, ", "))
			}
			what = fmt.Sprintf("its hold-out flags were flipped in place since: the file %s (sha256 %s then, %s now)", strings.Join(parts, " and "), studies.Short(ch.Used.BankHash), studies.Short(b.Hash))
		}
		return &studies.StaleAssetError{Asset: "bank:" + fb.JobKind, Want: ch.Used.BankHash, Got: b.Hash, Field: "holdout",
			Msg: fmt.Sprintf("%s: bank_version %q was used by decided study %q (recorded in %s) and %s; a used version's hold-out split is fixed (restore the flags as they were; or copy the bank under a new bank_version, set its flags there, audit it with rig tasks audit and point the design's task_bank at the copy)",
				fb.Path, b.Header.BankVersion, ch.Used.Study, file, what)}
	}
	return nil
}
