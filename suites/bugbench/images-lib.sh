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

# rootfs PACKAGES...: a debootstrap minbase root filesystem of DEBIAN_SUITE
# from DEBIAN_MIRROR with PACKAGES, in a new temporary directory whose path
# it prints.
rootfs() {
  local dir
  dir=$(mktemp -d)/rootfs
  command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
  debootstrap --variant=minbase --include="$(IFS=,; echo "$*")" \
    "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" >"$dir.log" 2>&1 || { tail -20 "$dir.log" >&2; exit 1; }
  echo "$dir"
}

# trim_rootfs DIR [PATH...]: removes from a root filesystem apt's caches
# and lists, manuals, locales and docs but their copyright files, and PATHs.
trim_rootfs() {
  local dir=$1
  shift
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/man "$dir"/usr/share/locale/* "$@"
  find "$dir/usr/share/doc" -type f ! -name copyright -delete
}
