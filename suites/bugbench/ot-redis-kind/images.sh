#!/usr/bin/env bash
# Builds OT-CONTAINER-KIT/redis-operator's three images offline, as a user of
# the operator would who has its source and no registry: no base image is
# pulled.
#
#   OPERATOR_SOURCE=<operator tree> REDIS_IMAGE_SOURCE=<OT-CONTAINER-KIT/redis tree> ./images.sh
#
#   example.com/redis-operator:dev-<sha>  the operator's Dockerfile, its builder stage run
#                                         with the local Go (CGO off), FROM scratch, user 65532
#   example.com/redis:<debian-suite>      the opstree image (quay.io/opstree/redis): its
#                                         entrypoint, health check and redis.conf from
#                                         REDIS_IMAGE_SOURCE over Debian's redis-server
#                                         (no source build of Redis), user 1000
#   example.com/redis-exporter:<debian-suite>  redis_exporter from Debian's package
#                                         (opstree's Dockerfile.exporter downloads a release
#                                         binary; its Go module's checksum is not served here)
#
# It writes bin/images.env (or GAUNTLET_IMAGES_ENV, as gauntlet bench
# bugs --kind asks of an images command: OT_REDIS_OPERATOR_IMAGE, REDIS_IMAGE,
# REDIS_EXPORTER_IMAGE) for gauntlet run --set. An image whose tag is present
# is reused; every step prints how long it took.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
: "${OPERATOR_SOURCE:?set OPERATOR_SOURCE to a source tree of OT-CONTAINER-KIT/redis-operator}"
: "${REDIS_IMAGE_SOURCE:?set REDIS_IMAGE_SOURCE to a source tree of OT-CONTAINER-KIT/redis (the image repository)}"
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
REDIS_IMAGE=${REDIS_IMAGE:-example.com/redis:$DEBIAN_SUITE}
REDIS_EXPORTER_IMAGE=${REDIS_EXPORTER_IMAGE:-example.com/redis-exporter:$DEBIAN_SUITE}
bin=$PWD/bin
mkdir -p "$bin"

# shellcheck source=../images-lib.sh
. ../images-lib.sh   # log, step, have_image, docker_build, rootfs, trim_rootfs

build_operator() {
  (cd "$OPERATOR_SOURCE" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/operator" ./cmd)
}

operator_image() {
  local ctx
  ctx=$(mktemp -d)
  cp "$bin/operator" "$ctx/operator"
  printf 'FROM scratch\nCOPY operator /operator\nUSER 65532:65532\nENTRYPOINT ["/operator", "manager"]\n' >"$ctx/Dockerfile"
  docker_build "$OPERATOR_IMAGE" "$ctx"
  rm -rf "$ctx"
}

redis_image() {
  local dir version script
  # bash and hostname run the entrypoint (hostname -i); redis-tools has
  # redis-cli, which the health check and the operator's pods/exec use.
  dir=$(rootfs redis-server redis-tools bash hostname)
  trim_rootfs "$dir"
  version=$(chroot "$dir" dpkg-query -W -f '${Version}' redis-server)
  # What opstree's Dockerfile adds to its Alpine build of Redis.
  install -m 0644 "$REDIS_IMAGE_SOURCE/redis.conf" "$dir/etc/redis/redis.conf"
  for script in entrypoint.sh setupMasterSlave.sh healthcheck.sh; do
    install -m 0755 "$REDIS_IMAGE_SOURCE/$script" "$dir/usr/bin/$script"
  done
  mkdir -p "$dir/data" "$dir/node-conf"
  chown -R 1000:0 "$dir/etc/redis" "$dir/data" "$dir/node-conf"
  chmod -R g+rw "$dir/etc/redis" "$dir/data" "$dir/node-conf" "$dir/var/run/"
  tar -C "$dir" --numeric-owner -c . | docker import \
    -c 'USER 1000' -c 'WORKDIR /data' -c 'ENV REDIS_PORT=6379' -c 'EXPOSE 6379' \
    -c 'ENTRYPOINT ["/usr/bin/entrypoint.sh"]' \
    -c "LABEL org.debian.package.redis-server=$version" - "$REDIS_IMAGE" >/dev/null
  rm -rf "$(dirname "$dir")"
}

exporter_image() {
  local dir version
  dir=$(rootfs prometheus-redis-exporter)
  trim_rootfs "$dir"
  version=$(chroot "$dir" dpkg-query -W -f '${Version}' prometheus-redis-exporter)
  tar -C "$dir" --numeric-owner -c . | docker import \
    -c 'USER 65534:65534' -c 'EXPOSE 9121' -c 'ENTRYPOINT ["/usr/bin/prometheus-redis-exporter"]' \
    -c "LABEL org.debian.package.prometheus-redis-exporter=$version" - "$REDIS_EXPORTER_IMAGE" >/dev/null
  rm -rf "$(dirname "$dir")"
}

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info)" >&2; exit 1; }
step "operator binary (go build ./cmd in $OPERATOR_SOURCE)" build_operator
OPERATOR_IMAGE=example.com/redis-operator:dev-$(sha256sum "$bin/operator" | cut -c1-12)
if have_image "$OPERATOR_IMAGE"; then log "reusing $OPERATOR_IMAGE"; else step "operator image $OPERATOR_IMAGE" operator_image; fi
if have_image "$REDIS_IMAGE"; then log "reusing $REDIS_IMAGE"; else step "redis image $REDIS_IMAGE (Debian $DEBIAN_SUITE, debootstrap)" redis_image; fi
if have_image "$REDIS_EXPORTER_IMAGE"; then
  log "reusing $REDIS_EXPORTER_IMAGE"
else
  step "exporter image $REDIS_EXPORTER_IMAGE (Debian $DEBIAN_SUITE, debootstrap)" exporter_image
fi
log "redis-server $(docker image inspect --format '{{index .Config.Labels "org.debian.package.redis-server"}}' "$REDIS_IMAGE") from Debian $DEBIAN_SUITE"
printf 'OT_REDIS_OPERATOR_IMAGE=%s\nREDIS_IMAGE=%s\nREDIS_EXPORTER_IMAGE=%s\n' \
  "$OPERATOR_IMAGE" "$REDIS_IMAGE" "$REDIS_EXPORTER_IMAGE" >"${GAUNTLET_IMAGES_ENV:-$bin/images.env}"
log "images: $OPERATOR_IMAGE $REDIS_IMAGE $REDIS_EXPORTER_IMAGE (names in bin/images.env)"
