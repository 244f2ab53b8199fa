#!/usr/bin/env bash
# Builds pravega/zookeeper-operator's two images offline, as a user of the
# operator would who has its source and no registry: no base image is
# pulled, Gradle and Maven are not needed.
#
#   OPERATOR_SOURCE=<operator tree> ./images.sh
#
#   example.com/zookeeper-operator:dev-<sha>  the tree's Dockerfile: main.go built with the
#                                             local Go (CGO off), FROM scratch, user 65532
#   example.com/zookeeper:3.9.3-trixie        the tree's docker/Dockerfile (zookeeper:3.7.1 +
#                                             docker/bin + zu.jar + dnsutils curl procps socat)
#                                             remade from Debian trixie's packages: its
#                                             zookeeper (3.9.3) on a headless JRE, the
#                                             tree's docker/bin scripts unchanged, zu.jar
#                                             compiled from docker/zu with Debian's kotlinc
#
# It writes bin/images.env (or GAUNTLET_IMAGES_ENV, as gauntlet bench
# bugs --kind asks of an images command: ZOOKEEPER_OPERATOR_IMAGE, ZOOKEEPER_IMAGE and
# ZOOKEEPER_IMAGE_REPOSITORY/_TAG, the same image split as a
# ZookeeperCluster's spec.image wants it) for gauntlet run --set or the
# environment. An image whose tag is present is reused; every step prints
# how long it took. Root is needed (debootstrap, chroot).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
: "${OPERATOR_SOURCE:?set OPERATOR_SOURCE to a source tree of pravega/zookeeper-operator}"
DEBIAN_SUITE=${DEBIAN_SUITE:-trixie}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ZOOKEEPER_IMAGE_REPOSITORY=${ZOOKEEPER_IMAGE_REPOSITORY:-example.com/zookeeper}
ZOOKEEPER_IMAGE_TAG=${ZOOKEEPER_IMAGE_TAG:-3.9.3-$DEBIAN_SUITE}
ZOOKEEPER_IMAGE=$ZOOKEEPER_IMAGE_REPOSITORY:$ZOOKEEPER_IMAGE_TAG
OPERATOR_VERSION=${OPERATOR_VERSION:-0.0.0-localdev}   # the Dockerfile's VERSION (a source archive has no git)
here=$PWD
bin=$PWD/bin
mkdir -p "$bin"

# shellcheck source=../images-lib.sh
. ../images-lib.sh   # log, step, have_image, docker_build, rootfs, trim_rootfs

build_operator() {
  local repo=github.com/pravega/zookeeper-operator
  (cd "$OPERATOR_SOURCE" && CGO_ENABLED=0 go build -trimpath -o "$bin/zookeeper-operator" \
    -ldflags "-s -w -X $repo/pkg/version.Version=$OPERATOR_VERSION -X $repo/pkg/version.GitSHA=0000000" .)
}

operator_image() {
  local ctx
  ctx=$(mktemp -d)
  cp "$bin/zookeeper-operator" "$ctx/zookeeper-operator"
  # The Deployment runs `zookeeper-operator` by name: PATH must find it.
  printf '%s\n' 'FROM scratch' 'COPY zookeeper-operator /usr/local/bin/zookeeper-operator' \
    'ENV PATH=/usr/local/bin' 'USER 65532:65532' 'ENTRYPOINT ["/usr/local/bin/zookeeper-operator"]' >"$ctx/Dockerfile"
  docker_build "$OPERATOR_IMAGE" "$ctx"
  rm -rf "$ctx"
}

# in_chroot DIR COMMAND...: COMMAND in DIR with /proc mounted (the JVM reads it).
in_chroot() {
  local dir=$1 rc=0
  shift
  mount -t proc proc "$dir/proc"
  chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@" || rc=$?
  umount "$dir/proc"
  return "$rc"
}

# The ZooKeeper image's root filesystem, shared by both steps below: what
# the server and the scripts run (Debian's ZooKeeper libraries, a headless
# JRE, bash, hostname -s, getent, nslookup, curl, ps, socat).
base_rootfs() {
  ROOTFS=$(rootfs libzookeeper-java default-jre-headless adduser bash hostname procps socat curl bind9-dnsutils)
  cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"   # apt-get in a chroot below
}

# zu.jar: docker/zu's Kotlin (the registration tool the scripts call as
# java -jar /opt/libs/zu.jar add|remove|sync ...), compiled with Debian's
# kotlinc (1.3.31; its Gradle build names 1.5.31 and the shadow plugin, which
# cannot be downloaded here) in a throwaway copy of the root filesystem
# with kotlin and a JDK. The jar carries the Kotlin standard library, as
# the shadow jar does, and takes ZooKeeper from Debian's jars by its
# manifest's Class-Path. The same JDK compiles ./image's metrics provider.
build_jars() {
  local build
  build=$(dirname "$ROOTFS")/build
  cp -a "$ROOTFS" "$build"
  in_chroot "$build" sh -c 'apt-get update -qq && apt-get install -y --no-install-recommends kotlin default-jdk-headless \
    >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log >&2; exit 1; }'
  mkdir -p "$build/src/zu" "$build/src/metrics"
  cp -r "$OPERATOR_SOURCE/docker/zu/src" "$build/src/zu/"
  cp "$here/image/PrometheusMetricsProvider.java" "$build/src/metrics/"
  # shellcheck disable=SC2016 # expanded in the chroot
  in_chroot "$build" sh -euc '
    zk=/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar
    cd /src/zu
    # (kotlinc 1.3 passes -noverify, which JDK 21 warns about)
    kotlinc -jvm-target 1.8 -cp "$zk" -d classes $(find src -name "*.kt") 2>&1 | grep -v "^warning:\|noverify" || true
    test -f classes/io/pravega/zookeeper/MainKt.class
    (cd classes && jar xf /usr/share/java/kotlin-stdlib.jar && rm -rf META-INF/*.SF META-INF/*.RSA META-INF/*.DSA META-INF/MANIFEST.MF)
    printf "%s\n" "Main-Class: io.pravega.zookeeper.MainKt" \
      "Class-Path: /usr/share/java/zookeeper.jar /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar" >manifest
    jar cfm zu.jar manifest -C classes .
    cd /src/metrics
    javac --release 11 -cp "$zk" -d classes PrometheusMetricsProvider.java
    jar cf zookeeper-metrics-stub.jar -C classes .'
  mkdir -p "$ROOTFS/opt/libs" "$ROOTFS/usr/share/zookeeper/lib"
  install -m 0644 "$build/src/zu/zu.jar" "$ROOTFS/opt/libs/zu.jar"
  install -m 0644 "$build/src/metrics/zookeeper-metrics-stub.jar" "$ROOTFS/usr/share/zookeeper/lib/"
  rm -rf "$build"
}

zookeeper_image() {
  local dir=$ROOTFS version script
  # Debian's zookeeper package holds the scripts (zkServer.sh, zkCli.sh)
  # and depends on the full default-jre (GTK and X11, which debootstrap
  # cannot even configure) for its GUI inspector: install it on the
  # headless JRE alone.
  in_chroot "$dir" sh -euc 'cd /tmp && apt-get update -qq && apt-get download -qq zookeeper &&
    dpkg --ignore-depends=default-jre -i zookeeper_*.deb >/dev/null && rm zookeeper_*.deb'
  # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
  version=$(chroot "$dir" dpkg-query -W -f '${Version}' zookeeper)
  # Upstream's layout where the scripts look: zkServer.sh and zkCli.sh on
  # PATH, `--config` and /conf honoured (./image/zkEnv.sh), /data, and the
  # tree's docker/bin scripts in /usr/local/bin as its Dockerfile puts them.
  rm -f "$dir/usr/share/zookeeper/bin/zkEnv.sh"
  install -m 0755 "$here/image/zkEnv.sh" "$dir/usr/share/zookeeper/bin/zkEnv.sh"
  for script in "$OPERATOR_SOURCE"/docker/bin/*; do
    install -m 0755 "$script" "$dir/usr/local/bin/$(basename "$script")"
  done
  mkdir -p "$dir/conf" "$dir/data" "$dir/datalog" "$dir/logs"
  trim_rootfs "$dir" "$dir"/usr/share/zookeeper/zooinspector "$dir"/etc/resolv.conf
  tar -C "$dir" --numeric-owner -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/share/zookeeper/bin' \
    -c 'ENV ZOO_CONF_DIR=/conf ZOO_DATA_DIR=/data ZOO_DATA_LOG_DIR=/datalog ZOO_LOG_DIR=/logs' \
    -c 'WORKDIR /' -c 'EXPOSE 2181 2888 3888 7000 8080' -c 'CMD ["zkServer.sh", "start-foreground"]' \
    -c "LABEL org.debian.package.zookeeper=$version" - "$ZOOKEEPER_IMAGE" >/dev/null
  rm -rf "$(dirname "$dir")"
}

docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (docker info)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "error: run as root (debootstrap, chroot, mount)" >&2; exit 1; }
step "operator binary (go build . in $OPERATOR_SOURCE)" build_operator
OPERATOR_IMAGE=example.com/zookeeper-operator:dev-$(sha256sum "$bin/zookeeper-operator" | cut -c1-12)
if have_image "$OPERATOR_IMAGE"; then log "reusing $OPERATOR_IMAGE"; else step "operator image $OPERATOR_IMAGE" operator_image; fi
if have_image "$ZOOKEEPER_IMAGE"; then
  log "reusing $ZOOKEEPER_IMAGE"
else
  step "root filesystem (Debian $DEBIAN_SUITE, debootstrap)" base_rootfs
  step "zu.jar and the metrics stub (kotlinc, javac in a copy with kotlin and a JDK)" build_jars
  step "zookeeper image $ZOOKEEPER_IMAGE" zookeeper_image
fi
log "zookeeper $(docker image inspect --format '{{index .Config.Labels "org.debian.package.zookeeper"}}' "$ZOOKEEPER_IMAGE") from Debian $DEBIAN_SUITE"
printf '%s\n' "ZOOKEEPER_OPERATOR_IMAGE=$OPERATOR_IMAGE" "ZOOKEEPER_IMAGE=$ZOOKEEPER_IMAGE" \
  "ZOOKEEPER_IMAGE_REPOSITORY=$ZOOKEEPER_IMAGE_REPOSITORY" "ZOOKEEPER_IMAGE_TAG=$ZOOKEEPER_IMAGE_TAG" >"${GAUNTLET_IMAGES_ENV:-$bin/images.env}"
log "images: $OPERATOR_IMAGE $ZOOKEEPER_IMAGE (names in bin/images.env)"
