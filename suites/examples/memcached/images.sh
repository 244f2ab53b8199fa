#!/usr/bin/env bash
# Builds the Memcached operator's two images offline, as an operator author
# would in their own repository: no base image is pulled.
#
#   ./images.sh     writes bin/images.env (MEMCACHED_OPERATOR_IMAGE, MEMCACHED_IMAGE)
#
#   example.com/memcached-operator:dev-<sha>  the manager (go build), FROM scratch, user 65532
#   example.com/memcached:<debian-suite>      memcached from Debian's package: a debootstrap
#                                             minbase root filesystem, run as Debian's memcache user (by uid)
#
# Each image is reused when its tag is present; every step prints how long it took.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MEMCACHED_IMAGE=${MEMCACHED_IMAGE:-example.com/memcached:$DEBIAN_SUITE}
mkdir -p bin

log() { echo "$(date +%T) $*"; }
step() { # step DESCRIPTION FUNCTION
  local t0=$SECONDS
  log "$1 ..."
  "$2"
  log "$1 ... done in $((SECONDS - t0))s"
}
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

build_manager() { CGO_ENABLED=0 go build -trimpath -o bin/manager ./cmd/manager; }

operator_image() {
  local ctx
  ctx=$(mktemp -d)
  cp bin/manager "$ctx/manager"
  printf 'FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]\n' >"$ctx/Dockerfile"
  local out # the legacy builder's deprecation notice only matters when the build fails
  out=$(docker build --quiet --tag "$OPERATOR_IMAGE" "$ctx" 2>&1) || { echo "$out" >&2; exit 1; }
  rm -rf "$ctx"
}

memcached_image() {
  local dir
  dir=$(mktemp -d)/rootfs
  command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
  debootstrap --variant=minbase --include=memcached "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log"; exit 1; }
  local version
  version=$(chroot "$dir" dpkg-query -W -f '${Version}' memcached)
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/man "$dir"/usr/share/locale/*
  find "$dir/usr/share/doc" -type f ! -name copyright -delete
  # memcached refuses to run as root; Debian's package made the memcache user.
  # The image names it by number, so that the kubelet can check runAsNonRoot.
  local user
  user=$(chroot "$dir" sh -c 'echo "$(id -u memcache):$(id -g memcache)"')
  tar -C "$dir" --numeric-owner -c . | docker import \
    -c "USER $user" -c 'ENTRYPOINT ["/usr/bin/memcached"]' -c 'EXPOSE 11211' \
    -c "LABEL org.debian.package.memcached=$version" - "$MEMCACHED_IMAGE" >/dev/null
  rm -rf "$(dirname "$dir")"
}

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info)" >&2; exit 1; }
step "manager binary (go build ./cmd/manager)" build_manager
OPERATOR_IMAGE=example.com/memcached-operator:dev-$(sha256sum bin/manager | cut -c1-12)
if have_image "$OPERATOR_IMAGE"; then log "reusing $OPERATOR_IMAGE"; else step "operator image $OPERATOR_IMAGE" operator_image; fi
if have_image "$MEMCACHED_IMAGE"; then log "reusing $MEMCACHED_IMAGE"; else step "memcached image $MEMCACHED_IMAGE (Debian $DEBIAN_SUITE, debootstrap)" memcached_image; fi
log "memcached $(docker image inspect --format '{{index .Config.Labels "org.debian.package.memcached"}}' "$MEMCACHED_IMAGE") from Debian $DEBIAN_SUITE"
printf 'MEMCACHED_OPERATOR_IMAGE=%s\nMEMCACHED_IMAGE=%s\n' "$OPERATOR_IMAGE" "$MEMCACHED_IMAGE" >bin/images.env
log "images: $OPERATOR_IMAGE $MEMCACHED_IMAGE (names in bin/images.env)"
