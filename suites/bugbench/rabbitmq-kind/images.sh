#!/usr/bin/env bash
# Builds the two images rabbitmq/cluster-operator needs on kind, offline, as
# a user of the operator would who has its source and no registry: no base
# image is pulled.
#
#   OPERATOR_SOURCE=<rabbitmq/cluster-operator tree> ./images.sh
#
#   example.com/rabbitmq-cluster-operator:dev-<sha>
#       the operator's Dockerfile, its builder stage run with the local Go
#       (CGO off, -tags timetzdata), FROM scratch, /manager, user 1000
#   example.com/rabbitmq:<version>-<debian-suite>
#       Debian's rabbitmq-server (4.0.5 on trixie, Erlang 27) in a debootstrap
#       minbase root filesystem, laid out as the operator's StatefulSet expects
#       of the official image: user rabbitmq 999:999, HOME /var/lib/rabbitmq,
#       /etc/rabbitmq/conf.d, logs to the console, one plugins folder,
#       RabbitMQ's own scripts first on PATH (not Debian's wrappers in
#       /usr/sbin, which want root)
#
# It writes bin/images.env (or GAUNTLET_IMAGES_ENV, as gauntlet bench
# bugs --kind asks of an images command: RABBITMQ_OPERATOR_IMAGE, RABBITMQ_IMAGE) for
# gauntlet run --set. An image whose tag is present is reused; every step
# prints how long it took.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
: "${OPERATOR_SOURCE:?set OPERATOR_SOURCE to a source tree of rabbitmq/cluster-operator}"
DEBIAN_SUITE=${DEBIAN_SUITE:-trixie}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The rabbitmq-server version DEBIAN_SUITE ships: the tag names it, and the
# build fails if the suite ships another.
RABBITMQ_VERSION=${RABBITMQ_VERSION:-4.0.5}
RABBITMQ_IMAGE=${RABBITMQ_IMAGE:-example.com/rabbitmq:$RABBITMQ_VERSION-$DEBIAN_SUITE}
bin=$PWD/bin
mkdir -p "$bin"

# shellcheck source=../images-lib.sh
. ../images-lib.sh   # log, step, have_image, docker_build, rootfs, trim_rootfs

build_operator() {
  (cd "$OPERATOR_SOURCE" && CGO_ENABLED=0 go build -trimpath -tags timetzdata -ldflags "-s -w" -o "$bin/manager" ./cmd)
}

operator_image() {
  local ctx
  ctx=$(mktemp -d)
  cp "$bin/manager" "$ctx/manager"
  cat >"$ctx/Dockerfile" <<'EOF'
FROM scratch
COPY manager /manager
USER 1000:1000
ENTRYPOINT ["/manager"]
EOF
  docker_build "$OPERATOR_IMAGE" "$ctx"
  rm -rf "$ctx"
}

rabbitmq_rootfs() {
  local uid gid
  rmq_dir=$(rootfs rabbitmq-server)
  trim_rootfs "$rmq_dir"
  rmq_version=$(chroot "$rmq_dir" dpkg-query -W -f "\${Version}" rabbitmq-server)
  if [ "${rmq_version%%-*}" != "$RABBITMQ_VERSION" ]; then
    echo "error: Debian $DEBIAN_SUITE ships rabbitmq-server $rmq_version, not $RABBITMQ_VERSION (set RABBITMQ_VERSION)" >&2
    exit 1
  fi
  erlang_version=$(chroot "$rmq_dir" dpkg-query -W -f "\${Version}" erlang-base)
  # The operator runs both containers as uid 999 (runAsUser, fsGroup 0),
  # the official image's rabbitmq user; Debian's postinst made a system
  # user with the next free id.
  uid=$(chroot "$rmq_dir" id -u rabbitmq)
  gid=$(chroot "$rmq_dir" id -g rabbitmq)
  if [ "$uid:$gid" != 999:999 ]; then
    if chroot "$rmq_dir" getent passwd 999 >/dev/null || chroot "$rmq_dir" getent group 999 >/dev/null; then
      echo "error: uid or gid 999 is taken in the root filesystem" >&2
      exit 1
    fi
    chroot "$rmq_dir" groupmod -g 999 rabbitmq
    chroot "$rmq_dir" usermod -u 999 -g 999 -d /var/lib/rabbitmq rabbitmq
    find "$rmq_dir" -xdev \( -uid "$uid" -o -gid "$gid" \) -exec chown -h 999:999 {} +
  fi
  # What the StatefulSet mounts or writes: the cookie and .rabbitmqadmin.conf
  # in /var/lib/rabbitmq (an emptyDir), the data in its mnesia folder (the
  # claim), enabled_plugins in /operator, the operator's configuration
  # files into /etc/rabbitmq/conf.d, the pod's labels in /etc/pod-info.
  mkdir -p "$rmq_dir/var/lib/rabbitmq/mnesia" "$rmq_dir/etc/rabbitmq/conf.d" "$rmq_dir/operator" "$rmq_dir/etc/pod-info"
  chown 999:999 "$rmq_dir/var/lib/rabbitmq" "$rmq_dir/var/lib/rabbitmq/mnesia" "$rmq_dir/etc/rabbitmq" \
    "$rmq_dir/etc/rabbitmq/conf.d" "$rmq_dir/operator"
  # The root filesystem is read-only in the pods: nothing may go to
  # /var/log/rabbitmq (RABBITMQ_LOGS=- below sends the log to the console).
  rm -f "$rmq_dir/var/lib/rabbitmq/.erlang.cookie"
  test -x "$rmq_dir/usr/lib/rabbitmq/bin/rabbitmq-server" || {
    echo "error: no /usr/lib/rabbitmq/bin/rabbitmq-server in Debian's rabbitmq-server $rmq_version" >&2
    exit 1
  }
  # Debian's scripts search /usr/lib/rabbitmq/plugins (for plugins of other
  # packages; it does not exist) before the server's own folder: the server
  # skips it, but rabbitmq-plugins, which the operator runs by pods/exec,
  # stops at it (plugins_dir_does_not_exist). The image names the one folder
  # that holds the plugins, as the official image does.
  rmq_plugins=/usr/lib/rabbitmq/lib/rabbitmq_server-${rmq_version%%-*}/plugins
  test -d "$rmq_dir$rmq_plugins" || { echo "error: no $rmq_plugins in the root filesystem" >&2; exit 1; }
}

rabbitmq_import() {
  tar -C "$rmq_dir" --numeric-owner -c . | docker import \
    -c 'USER 999:999' -c 'WORKDIR /var/lib/rabbitmq' \
    -c 'ENV PATH=/usr/lib/rabbitmq/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV HOME=/var/lib/rabbitmq' -c 'ENV RABBITMQ_LOGS=-' -c 'ENV LANG=C.UTF-8' \
    -c "ENV RABBITMQ_PLUGINS_DIR=$rmq_plugins" \
    -c 'EXPOSE 4369 5671 5672 15672 15691 15692 25672' \
    -c 'CMD ["rabbitmq-server"]' \
    -c "LABEL org.debian.package.rabbitmq-server=$rmq_version org.debian.package.erlang-base=$erlang_version" \
    - "$RABBITMQ_IMAGE" >/dev/null
  rm -rf "$(dirname "$rmq_dir")"
}

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info)" >&2; exit 1; }
step "operator binary (go build ./cmd in $OPERATOR_SOURCE)" build_operator
OPERATOR_IMAGE=example.com/rabbitmq-cluster-operator:dev-$(sha256sum "$bin/manager" | cut -c1-12)
if have_image "$OPERATOR_IMAGE"; then log "reusing $OPERATOR_IMAGE"; else step "operator image $OPERATOR_IMAGE" operator_image; fi

if have_image "$RABBITMQ_IMAGE"; then
  log "reusing $RABBITMQ_IMAGE"
else
  rmq_dir='' rmq_version='' erlang_version='' rmq_plugins=''
  step "rabbitmq root filesystem (Debian $DEBIAN_SUITE, debootstrap)" rabbitmq_rootfs
  step "rabbitmq image $RABBITMQ_IMAGE" rabbitmq_import
fi
log "rabbitmq-server $(docker image inspect --format '{{index .Config.Labels "org.debian.package.rabbitmq-server"}}' "$RABBITMQ_IMAGE")," \
  "erlang $(docker image inspect --format '{{index .Config.Labels "org.debian.package.erlang-base"}}' "$RABBITMQ_IMAGE") from Debian $DEBIAN_SUITE"
printf 'RABBITMQ_OPERATOR_IMAGE=%s\nRABBITMQ_IMAGE=%s\n' "$OPERATOR_IMAGE" "$RABBITMQ_IMAGE" >"${GAUNTLET_IMAGES_ENV:-$bin/images.env}"
log "images: $OPERATOR_IMAGE $RABBITMQ_IMAGE (names in bin/images.env)"
