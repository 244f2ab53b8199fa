# shellcheck shell=bash
# Shared by the image build scripts (source it): timestamped log lines and a
# step runner that prints one line per step with its duration.

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
