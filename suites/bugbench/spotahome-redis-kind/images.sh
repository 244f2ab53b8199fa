#!/usr/bin/env bash
# Builds the two images spotahome/redis-operator needs on kind, offline, as
# a user of the operator would who has its source and no registry: no base
# image is pulled.
#
#   OPERATOR_SOURCE=<spotahome/redis-operator tree> ./images.sh
#
#   example.com/spotahome-redis-operator:dev-<sha>
#       docker/app/Dockerfile's build stage (scripts/build.sh: go build
#       ./cmd/redisoperator, CGO off) run with the local Go, FROM scratch
#       instead of alpine, /usr/local/bin/redis-operator, user 1000 (its rf)
#   example.com/redis-server:<debian-suite>
#       Debian's redis-server and redis-tools in a debootstrap minbase root
#       filesystem, for the RedisFailover's redis and sentinel containers:
#       the operator gives them their command lines (redis-server
#       /redis/redis.conf, redis-server /redis/sentinel.conf --sentinel, cp
#       in the sentinel's init container, sh scripts with redis-cli, grep,
#       tr, xargs, cut and hostname in the probes and the preStop hook), runs
#       them as uid/gid 1000 on a read-only root filesystem, and expects
#       what its default image (Docker Hub's redis:6.2.6-alpine) does:
#       working directory /data, and protected mode off (Docker's image
#       patches it off; Debian's redis-server has it on, and then refuses the
#       operator's and the probes' connections to the pod IP): a
#       redis-server wrapper in /usr/local/bin adds --protected-mode no
#       unless the configuration file or the arguments set it.
#
# It writes bin/images.env (or GAUNTLET_IMAGES_ENV, as gauntlet bench
# bugs --kind asks of an images command: SPOTAHOME_OPERATOR_IMAGE, REDIS_IMAGE) for
# gauntlet run --set. An image whose tag is present is reused; every step
# prints how long it took.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
: "${OPERATOR_SOURCE:?set OPERATOR_SOURCE to a source tree of spotahome/redis-operator}"
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
REDIS_IMAGE=${REDIS_IMAGE:-example.com/redis-server:$DEBIAN_SUITE}
bin=$PWD/bin
mkdir -p "$bin"

# shellcheck source=../images-lib.sh
. ../images-lib.sh   # log, step, have_image, docker_build, rootfs, trim_rootfs

build_operator() {
  # No vendor/ at v1.2.x: the modules come from the Go module proxy (about
  # 2.5 min cold here). -X main.Version as scripts/build.sh stamps it.
  (cd "$OPERATOR_SOURCE" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=${VERSION:-dev}" \
    -o "$bin/redis-operator" ./cmd/redisoperator)
}

operator_image() {
  local ctx
  ctx=$(mktemp -d)
  cp "$bin/redis-operator" "$ctx/redis-operator"
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY redis-operator /usr/local/bin/redis-operator
USER 1000:1000
ENTRYPOINT ["/usr/local/bin/redis-operator"]
DOCKERFILE
  docker_build "$OPERATOR_IMAGE" "$ctx"
  rm -rf "$ctx"
}

redis_image() {
  local dir version
  dir=$(rootfs redis-server redis-tools hostname)
  trim_rootfs "$dir"
  version=$(chroot "$dir" dpkg-query -W -f '${Version}' redis-server)
  # Docker's redis image turns protected mode off at build time (in the
  # source); without that, a server with no password answers every
  # connection but the loopback's with DENIED.
  cat >"$dir/usr/local/bin/redis-server" <<'WRAPPER'
#!/bin/sh
# Protected mode off by default, as in Docker's redis image (see images.sh).
case " $* " in *" --protected-mode "*) exec /usr/bin/redis-server "$@" ;; esac
if [ -f "${1:-}" ] && grep -qs '^[[:space:]]*protected-mode' "$1"; then exec /usr/bin/redis-server "$@"; fi
exec /usr/bin/redis-server "$@" --protected-mode no
WRAPPER
  chmod 0755 "$dir/usr/local/bin/redis-server"
  mkdir -p "$dir/data"
  chown 1000:1000 "$dir/data"
  tar -C "$dir" --numeric-owner -c . | docker import \
    -c 'USER 1000:1000' -c 'WORKDIR /data' -c 'EXPOSE 6379 26379' \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["redis-server"]' \
    -c "LABEL org.debian.package.redis-server=$version" - "$REDIS_IMAGE" >/dev/null
  rm -rf "$(dirname "$dir")"
}

# fits IMAGE: the programs the operator's pods run are there, and a Redis
# server started as the pods start it accepts a connection to its pod IP.
fits() {
  docker run --rm --user 1000:1000 --read-only --tmpfs /data --entrypoint sh "$1" -c '
    for c in redis-server redis-cli sh cp grep tr xargs cut hostname; do
      command -v "$c" >/dev/null || { echo "no $c"; exit 1; }
    done
    redis-server --port 6379 --daemonize yes >/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      answer=$(redis-cli -h "$(hostname -i)" ping 2>&1)
      [ "$answer" = PONG ] && exit 0
      sleep 0.5
    done
    echo "redis-server does not answer PING on its pod IP: ${answer%%.*}"; exit 1' >&2
}
fits_redis() { fits "$REDIS_IMAGE"; }

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info)" >&2; exit 1; }
step "operator binary (go build ./cmd/redisoperator in $OPERATOR_SOURCE)" build_operator
OPERATOR_IMAGE=example.com/spotahome-redis-operator:dev-$(sha256sum "$bin/redis-operator" | cut -c1-12)
if have_image "$OPERATOR_IMAGE"; then log "reusing $OPERATOR_IMAGE"; else step "operator image $OPERATOR_IMAGE" operator_image; fi
if have_image "$REDIS_IMAGE"; then log "reusing $REDIS_IMAGE"; else step "redis image $REDIS_IMAGE (Debian $DEBIAN_SUITE, debootstrap)" redis_image; fi
step "redis image $REDIS_IMAGE fits the operator's pods" fits_redis
log "redis-server $(docker image inspect --format '{{index .Config.Labels "org.debian.package.redis-server"}}' "$REDIS_IMAGE") from Debian $DEBIAN_SUITE"
printf 'SPOTAHOME_OPERATOR_IMAGE=%s\nREDIS_IMAGE=%s\n' "$OPERATOR_IMAGE" "$REDIS_IMAGE" >"${GAUNTLET_IMAGES_ENV:-$bin/images.env}"
log "images: $OPERATOR_IMAGE $REDIS_IMAGE (names in bin/images.env)"
