#!/usr/bin/env bash
# A bundled example study, end to end on the real runtimes and models:
# register → review → approve → freeze → preflight → validate → run → report.
# By default the quick one (examples/quick-study: SmolLM2 at Q4_1 against
# its Q8_0 requantization, both on llama-server at 4 slots, a few minutes); RIG_DEMO_DESIGN names another (make demo-full, demo-cards, demo-stopping).
# It starts a private daemon for the demo's own home and stops it at the end.
# Everything is idempotent: running it again reuses the registered study and
# makes a new execution only when the last one did not finish.
set -Eeuo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rig=${RIG_DEMO_BIN:-$root/bin/rig} # the tests run the script with the binary they built
design=${RIG_DEMO_DESIGN:-$root/examples/quick-study/design.json}
again=${RIG_DEMO_TARGET:-make demo} # what a user types to resume
export RIG_HOME=${RIG_DEMO_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/rig-demo}
mkdir -p "$RIG_HOME"
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$design")

current=""
step() { current="$*"; printf '\n== [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# When a step fails, say which, where its evidence is, and that a second
# `make demo` resumes: the registered study, its freeze, the preflight
# verdicts, every validation run that passed and every trial with a counted
# receipt are kept, so only what did not finish runs again.
on_failure() {
  local rc=$?
  {
    echo
    echo "rig demo: stopped at step \"$current\" (exit $rc); what went wrong is printed above."
    echo "  the daemon's log:  $RIG_HOME/daemon.log"
    echo "  the study's files: $RIG_HOME/studies/$name"
    echo "  to resume, run:    $again"
    echo "  (it keeps what is done: registration, freeze, preflight verdicts, passed validation runs, finished trials)"
    echo "  to start over:     rm -rf $RIG_HOME && $again"
  } >&2
}
trap on_failure ERR

step "runtimes (rig runtimes check)"
"$rig" runtimes check

step "governor fault-injection suite (counted runs need a pass from the last 24 h)"
"$rig" governor status >/dev/null 2>&1 || "$rig" governor faults

step "starting a private daemon for $RIG_HOME"
"$rig" daemon >"$RIG_HOME/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
"$rig" daemon wait --timeout 30s

# The workspace: every study's report and the live progress of this run, in
# a browser, read-only, on loopback behind a single-use token.
step "workspace (rig ui): watch the run in a browser"
ui_url=$("$rig" ui)
echo "workspace: $ui_url"
echo "  (read-only, 127.0.0.1 only; the URL opens it once, within 10 minutes: RIG_HOME=$RIG_HOME $rig ui prints another; it lives as long as this demo's daemon)"

step "register $design"
"$rig" study register "$design"
state=$("$rig" study status "$name" | awk '/^state/{print $2}')
if [ "$state" = draft ]; then
  step "outside review (with its licence line) and the Director's approval"
  "$rig" study review "$name" --verdict pass \
    --licence-line "every item checked against licences/registry.json for evaluation and inference: SmolLM2 and its Q8_0 requantization are Apache-2.0; gemma-3-270m (card study only) is restricted by the Gemma Terms of Use and its Prohibited Use Policy, read and accepted: these tasks do not touch it" \
    --why "demo review"
  "$rig" study approve "$name" --why "demo approval"
  state=approved
fi
if [ "$state" = approved ]; then
  step "freeze"
  "$rig" study freeze "$name"
fi

step "fit preflight per arm at the card profile (recorded before any run)"
"$rig" study preflight "$name"

step "one free validation run per harness"
"$rig" study validate "$name"

step "dry run (prices the plan at the speeds validation measured; derives any \"auto\" wall cap)"
"$rig" study dry-run "$name"

step "counted run"
# The key makes this idempotent: a second demo follows the same execution
# (which the daemon resumed if it was stopped mid-run) instead of starting one.
# (read whole first: grep -q stopping early would fail the pipe under pipefail)
status=$("$rig" study status "$name")
if ! grep -q ': done,' <<<"$status"; then
  "$rig" study run "$name" --key "$name-demo-run"
fi

step "report (a sample of every generation record replayed through its pinned model; checked in headless Chromium)"
shot="$RIG_HOME/studies/$name/report.png"
"$rig" study report "$name" --replay-sample "${RIG_DEMO_REPLAY_SAMPLE:-3}" --screenshot "$shot"
md=$(ls -t "$RIG_HOME"/studies/"$name"/reports/*/report.md | head -1)
# Each arm's slots as the report's speed card shows them: the trials of that
# arm the run kept in flight at once (its pins.slots).
slots=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(", ".join("%s %d" % (s["arm"], s.get("slots") or 1) for k in d["kinds"] for s in k.get("speed") or []))' "$(dirname "$md")/report.json")
if grep -q '^## Card sub-study' "$md"; then
  step "card table"
  awk '/^## Card sub-study/{on=1} on&&/^## /&&!/Card sub-study/{exit} on' "$md"
fi
echo
echo "receipts:           $RIG_HOME/studies/$name/store.bolt (rig receipts export: see README)"
echo "generation records: $RIG_HOME/studies/$name/executions/*/generations-*.jsonl"
echo "report:             $(ls -t "$RIG_HOME"/studies/"$name"/reports/*/report.html | head -1)"
echo "screenshot:         $shot"
echo "slots:              ${slots:-none timed} (trials of an arm in flight at once, its pins.slots; the report's speed card)"
echo "demo took:          $((SECONDS / 60))m$((SECONDS % 60))s"
