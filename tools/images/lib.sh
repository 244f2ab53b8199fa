# shellcheck shell=bash
# Shared by the image build scripts (source it): timestamped log lines, a
# step runner that prints one line per step with its duration, and the
# image helpers: a quiet docker build and the inputs hash an image carries.

log() { echo "$(date +%T) $*"; }
fmt_dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# run_step NAME DESCRIPTION FUNCTION: times FUNCTION, prints one line when done.
run_step() {
  local name=$1 desc=$2 fn=$3 t0 rc
  t0=$(date +%s)
  log "step $name: $desc ..."
  set +e
  ( set -e; "$fn" )
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    log "step $name: $desc ... FAILED (exit $rc) after $(fmt_dur $(( $(date +%s) - t0 )))"
    exit $rc
  fi
  log "step $name: $desc ... done in $(fmt_dur $(( $(date +%s) - t0 )))"
}

# skip_step NAME DESCRIPTION REASON
skip_step() { log "step $1: $2 ... skipped ($3)"; }

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# image_inputs IMAGE: the inputs hash its build stamped on IMAGE (label
# gauntlet.dev/inputs), empty when IMAGE is absent or has none.
image_inputs() { docker image inspect -f '{{index .Config.Labels "gauntlet.dev/inputs"}}' "$1" 2>/dev/null; }
# have_current_image IMAGE INPUTS: IMAGE is there, built from INPUTS.
have_current_image() { [ "$(image_inputs "$1")" = "$2" ]; }

# quiet_build ARGS...: legacy `docker build -q ARGS`, silent unless it fails.
quiet_build() {
  local err; err=$(mktemp)
  docker build -q "$@" >/dev/null 2>"$err" || { cat "$err" >&2; rm -f "$err"; return 1; }
  rm -f "$err"
}
