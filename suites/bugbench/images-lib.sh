# shellcheck shell=bash
# Helpers the */images.sh of the operators run on kind share: each step
# printed with the time it took, images reused by tag, quiet docker builds.
# Sourced, not run.

log() { echo "$(date +%T) $*"; }

# step DESCRIPTION FUNCTION: runs FUNCTION between two timed lines.
step() {
  local t0=$SECONDS
  log "$1 ..."
  "$2"
  log "$1 ... done in $((SECONDS - t0))s"
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# docker_build TAG DIR: the legacy builder's deprecation notice only matters
# when the build fails.
docker_build() {
  local out
  out=$(docker build --quiet --tag "$1" "$2" 2>&1) || { echo "$out" >&2; exit 1; }
}
