#!/usr/bin/env bash
# Makes sure a headless Chromium answers, for the browser checks of the HTML
# chaos report (chaos/htmlreport/browser). If one already does ($GAUNTLET_CHROMIUM, or
# chromium on PATH), nothing is touched. Otherwise, on a Debian machine, it
# installs Debian's chromium package (no recommends; no network is needed by
# the checks themselves). Prints the binary's path last, on its own line, so
# callers can do: GAUNTLET_CHROMIUM=$(ci/chromium.sh | tail -n1).
#
# Another job may hold the apt/dpkg lock; apt waits for it up to
# $APT_LOCK_TIMEOUT seconds (default 600) rather than failing.
set -euo pipefail

log() { echo ">> $(date +%H:%M:%S) chromium: $*"; }

lock_timeout=${APT_LOCK_TIMEOUT:-600}

# answers PATH: prints PATH's version and succeeds if PATH is a Chromium that runs.
answers() {
  local v
  v=$("$1" --version 2>/dev/null) || return 1
  [ -n "$v" ] || return 1
  echo "$v"
}

if [ -n "${GAUNTLET_CHROMIUM:-}" ]; then
  if v=$(answers "$GAUNTLET_CHROMIUM"); then
    log "GAUNTLET_CHROMIUM answers ($v); leaving it alone"
    echo "$GAUNTLET_CHROMIUM"
    exit 0
  fi
  log "GAUNTLET_CHROMIUM=$GAUNTLET_CHROMIUM does not answer; looking for Debian's chromium"
fi

if bin=$(command -v chromium) && v=$(answers "$bin"); then
  log "chromium already answers ($v); leaving it alone"
  echo "$bin"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "chromium: no Chromium answers and this is not root: install Chromium yourself, or run $0 as root on a Debian machine, or set GAUNTLET_CHROMIUM to a Chromium binary" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "chromium: no Chromium answers and there is no apt-get: install Chromium yourself and set GAUNTLET_CHROMIUM to its binary" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o "DPkg::Lock::Timeout=$lock_timeout" -o "APT::Acquire::Retries=3")
start=$(date +%s)

# apt-get update only when the package lists do not know chromium yet.
if ! apt-cache show chromium >/dev/null 2>&1; then
  log "updating the package lists (waiting up to ${lock_timeout}s for the apt lock)"
  apt-get "${apt_opts[@]}" update -qq
fi

log "installing Debian's chromium (waiting up to ${lock_timeout}s for the apt lock)"
if ! apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends chromium >/dev/null; then
  # Stale package lists (a 404 on a superseded .deb): refresh once and retry.
  log "install failed; updating the package lists and retrying once"
  apt-get "${apt_opts[@]}" update -qq
  apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends chromium >/dev/null
fi

bin=$(command -v chromium) || {
  echo "chromium: the chromium package installed but no chromium is on PATH" >&2
  exit 1
}
v=$(answers "$bin") || {
  echo "chromium: $bin was installed but does not answer --version" >&2
  exit 1
}
log "installed in $(( $(date +%s) - start ))s: $v"
echo "$bin"
