#!/usr/bin/env bash
# Builds a kind node image for the e2e tier offline, from Go modules and Debian
# packages only: no container registry is contacted (see ../shared/DESIGN.md, "kind node
# image, offline", and README.md here for why each step is what it is).
#
#   tools/images/node/build.sh v1.37.2            every step, for that Kubernetes version
#   tools/images/node/build.sh 1.37.2             the same (the leading v is optional)
#   tools/images/node/build.sh v1.37.2 k8s etcd   only the named steps
#   tools/images/node/build.sh --list             the steps
#   tools/images/node/build.sh --versions         the Kubernetes versions it builds
#
# Each Kubernetes version takes its etcd, CoreDNS and pause versions (what its
# `kubeadm config images list` names), its container runtime and its pod network from the
# table under "versions" below:
#   v1.35.4  Debian's containerd 1.6, a bridge CNI conflist for one node baked in (the
#            harness routes between nodes itself, cluster/nodes.go);
#   v1.36.3, v1.37.2  containerd 2 built from its Go module (config version 3), and podnet
#            (src/podnet, a kindnetd-like DaemonSet kind applies from
#            /kind/manifests/default-cni.yaml), so several nodes route pod traffic
#            themselves.
#
# Every step skips itself when its output exists: binaries by version under
# bin/node/<component>/<version>/, images by tag (`docker image inspect`); the kind base
# and node images also carry a hash of their inputs (hand-written files, per runtime) and
# rebuild when it changes. v1.35.4's inputs are exactly the files they were before the
# table (inputs_hash), so an image built then stays current. Delete an output (or
# `docker rmi` a tag) to force a rebuild. Each step prints one progress line with its
# duration.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$ROOT/../../.." && pwd)
cd "$ROOT"
# The wrapper modules under src/ are modules of their own.
export GOWORK=off

# ---- versions ---------------------------------------------------------------------------
# One row per Kubernetes version (k8s.io/kubernetes; its staging modules at v0.<minor>.<patch>).
# etcd, its image tag, CoreDNS and pause are what that version's kubeadm names (step images
# checks it). containerd: "debian" = bookworm's 1.6 (serves Kubernetes up to 1.35), else a
# github.com/containerd/containerd/v2 version built here. network: "bridge" = one-node bridge
# conflist baked in, "podnet" = src/podnet as kind's default CNI. kind: sigs.k8s.io/kind,
# whose images/base/files the base takes and whose CLI creates such clusters (kubeadm 1.37
# accepts only v1beta4 configs, which kind writes for 1.36+ from v0.33.0; v0.31.0 wrote
# v1beta3 for every version).
VERSIONS='
# kubernetes  etcd    etcd-image  coredns  pause   containerd  network  kind
v1.35.4       v3.6.6  3.6.6-0     v1.13.1  3.10.1  debian      bridge   v0.31.0
v1.36.3       v3.6.8  3.6.8-0     v1.14.2  3.10.2  v2.4.2      podnet   v0.33.0
v1.37.2       v3.7.0  3.7.0-0     v1.14.6  3.10.2  v2.4.2      podnet   v0.33.0
'
DEFAULT_K8S_VERSION=v1.35.4
CRICTL_VERSION=v1.36.0       # sigs.k8s.io/cri-tools (v1.35.x is not served here)
LOCALPATH_VERSION=v0.0.30    # github.com/rancher/local-path-provisioner
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# normalize_version V: v1.37.2 from 1.37.2 or v1.37.2; a bare minor (1.37) takes its row.
normalize_version() {
  local v=v${1#v}
  if [[ "$v" =~ ^v[0-9]+\.[0-9]+$ ]]; then
    v=$(awk -v m="$v." 'index($1, m) == 1 { print $1 }' <<<"$VERSIONS" | tail -1)
  fi
  echo "$v"
}
# select_version V: set the row's variables, or fail naming the versions there are.
select_version() {
  local row
  row=$(awk -v v="$1" '$1 == v' <<<"$VERSIONS")
  if [ -z "$row" ]; then
    echo "error: no Kubernetes version $1 here; there are: $(awk '/^v/ { printf "%s ", $1 }' <<<"$VERSIONS")" >&2
    exit 2
  fi
  read -r K8S_VERSION ETCD_VERSION ETCD_IMAGE_TAG COREDNS_VERSION PAUSE_VERSION CONTAINERD_VERSION NETWORK KIND_VERSION <<<"$row"
}
K8S_ARG=
if [[ "${1:-}" =~ ^v?[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then K8S_ARG=$(normalize_version "$1"); shift; fi
select_version "${K8S_ARG:-$DEFAULT_K8S_VERSION}"

# ---- image tags -------------------------------------------------------------------------
REG=registry.k8s.io
BASE_ROOTFS_IMAGE=gauntlet.dev/bookworm-rootfs:${DEBIAN_SUITE}
# The kind base: Debian's containerd 1.6 (v1.35.4's), or containerd 2 built here.
if [ "$CONTAINERD_VERSION" = debian ]; then
  KIND_BASE_IMAGE=gauntlet.dev/kind-base:${KIND_VERSION}-${DEBIAN_SUITE}
else
  KIND_BASE_IMAGE=gauntlet.dev/kind-base:${KIND_VERSION}-${DEBIAN_SUITE}-containerd-${CONTAINERD_VERSION}
fi
HELPER_IMAGE=gauntlet.dev/local-path-helper:${DEBIAN_SUITE}
LOCALPATH_IMAGE=gauntlet.dev/local-path-provisioner:${LOCALPATH_VERSION}
NODE_IMAGE=${NODE_IMAGE:-gauntlet.dev/kind-node:${K8S_VERSION}}
# A NODE_IMAGE from the environment names the output; one tagged for
# another Kubernetes version would get this version's image under it.
case $NODE_IMAGE in
gauntlet.dev/kind-node:v*)
  if [ "${NODE_IMAGE#gauntlet.dev/kind-node:}" != "$K8S_VERSION" ]; then
    echo "error: NODE_IMAGE=$NODE_IMAGE names another version than the $K8S_VERSION this build makes" >&2
    exit 2
  fi ;;
esac

# ---- build environment ------------------------------------------------------------------
BIN=$REPO/bin/node
WORK=$BIN/work                  # rootfs, staging dirs, image tars (all regenerable)
export GOFLAGS=${GOFLAGS:--buildvcs=false}
export CGO_ENABLED=0
NICE=(nice -n 10)
K8S_CMDS=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)

# ---- helpers ----------------------------------------------------------------------------
# shellcheck source=tools/images/lib.sh
. "$REPO/tools/images/lib.sh"

# inputs_hash: short hash of the hand-written inputs of the base and node images, stored
# as an image label so that editing them rebuilds those images. The Debian-containerd row
# (v1.35.4) hashes exactly the three files it always has, in the same order, so images
# built before the version table stay current; the containerd 2 rows hash their own files,
# the kind and containerd versions and the podnet image (whose tag is its source's hash).
LEGACY_INPUTS=(10-gauntlet-bridge.conflist default-storage.yaml kind-base.Dockerfile)
CONTAINERD2_INPUTS=(default-storage.yaml kind-base-containerd2.Dockerfile containerd2-config.toml podnet.yaml)
inputs_hash() {
  if [ "$CONTAINERD_VERSION" = debian ]; then
    (cd "$ROOT/files" && cat "${LEGACY_INPUTS[@]}") | sha256sum | cut -c1-12
  else
    { (cd "$ROOT/files" && cat "${CONTAINERD2_INPUTS[@]}"); echo "kind $KIND_VERSION containerd $CONTAINERD_VERSION $PODNET_IMAGE"; } \
      | sha256sum | cut -c1-12
  fi
}
# have_current IMAGE: IMAGE is there, built from the inputs as they are now.
have_current() { have_current_image "$1" "$(inputs_hash)"; }
have_files() { local f; for f in "$@"; do [ -x "$f" ] || return 1; done; }

# modsrc NAME VERSION: the wrapper module building NAME at VERSION: src/NAME-VERSION, or
# src/NAME for the versions v1.35.4 takes (the modules that were there before the table).
modsrc() {
  if [ -d "$ROOT/src/$1-$2" ]; then echo "src/$1-$2"; else echo "src/$1"; fi
}
# check_require DIR MODULE VERSION: DIR's go.mod requires MODULE at VERSION.
check_require() {
  grep -Eq "^(require )?[[:space:]]*$2 $3( |\$)" "$ROOT/$1/go.mod" \
    || { echo "$1/go.mod does not require $2 $3" >&2; return 1; }
}

# gomod DIR: create go.sum on first use only (GOFLAGS=-mod=mod only here), then build read-only.
gomod() {
  local dir=$1
  if [ ! -e "$dir/go.sum" ]; then
    (cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
  fi
}

k8s_ldflags() {
  local major=${K8S_VERSION#v}; major=${major%%.*}
  local minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
  local f="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    f+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean"
    f+=" -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  echo "$f"
}

# ---- step (a): Kubernetes binaries ------------------------------------------------------
K8S_BIN=$BIN/kubernetes/$K8S_VERSION
step_k8s() {
  local tmp=$K8S_BIN.tmp
  local src; src=$(modsrc k8s "$K8S_VERSION")
  check_require "$src" k8s.io/kubernetes "$K8S_VERSION"
  gomod "$src"
  rm -rf "$tmp"; mkdir -p "$tmp"
  local pkgs=() c
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$src" && "${NICE[@]}" go build -trimpath -tags providerless -ldflags "$(k8s_ldflags)" -o "$tmp/" "${pkgs[@]}")
  grep -qx "$K8S_VERSION" <<<"$("$tmp/kubeadm" version -o short)"
  rm -rf "$K8S_BIN"; mv "$tmp" "$K8S_BIN"
}

# ---- step (b): etcd -----------------------------------------------------------------------
ETCD_BIN=$BIN/etcd/$ETCD_VERSION
step_etcd() {
  local src; src=$(modsrc etcd "$ETCD_VERSION")
  check_require "$src" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  gomod "$src"
  mkdir -p "$ETCD_BIN.tmp"
  (cd "$src" && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$ETCD_BIN.tmp/etcd" .)
  grep -q "etcd Version: ${ETCD_VERSION#v}" <<<"$("$ETCD_BIN.tmp/etcd" --version)"
  rm -rf "$ETCD_BIN"; mv "$ETCD_BIN.tmp" "$ETCD_BIN"
}

# ---- step (c): CoreDNS ----------------------------------------------------------------------
COREDNS_BIN=$BIN/coredns/$COREDNS_VERSION
step_coredns() {
  local src; src=$(modsrc coredns "$COREDNS_VERSION")
  check_require "$src" github.com/coredns/coredns "$COREDNS_VERSION"
  gomod "$src"
  mkdir -p "$COREDNS_BIN.tmp"
  (cd "$src" && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$COREDNS_BIN.tmp/coredns" github.com/coredns/coredns)
  grep -q "CoreDNS-${COREDNS_VERSION#v}" <<<"$("$COREDNS_BIN.tmp/coredns" -version)"
  rm -rf "$COREDNS_BIN"; mv "$COREDNS_BIN.tmp" "$COREDNS_BIN"
}

# ---- step (d): pause ------------------------------------------------------------------------
PAUSE_BIN=$BIN/pause/$PAUSE_VERSION
step_pause() {
  mkdir -p "$PAUSE_BIN.tmp"
  (cd src/pause && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$PAUSE_BIN.tmp/pause" .)
  rm -rf "$PAUSE_BIN"; mv "$PAUSE_BIN.tmp" "$PAUSE_BIN"
}

# ---- step (e): crictl -----------------------------------------------------------------------
CRICTL_BIN=$BIN/crictl/$CRICTL_VERSION
step_crictl() {
  gomod src/crictl
  mkdir -p "$CRICTL_BIN.tmp"
  (cd src/crictl && "${NICE[@]}" go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    -o "$CRICTL_BIN.tmp/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
  rm -rf "$CRICTL_BIN"; mv "$CRICTL_BIN.tmp" "$CRICTL_BIN"
}

# ---- step (f): local-path-provisioner -------------------------------------------------------
LOCALPATH_BIN=$BIN/local-path-provisioner/$LOCALPATH_VERSION
step_localpath() {
  gomod src/localpath
  mkdir -p "$LOCALPATH_BIN.tmp"
  (cd src/localpath && "${NICE[@]}" go build -trimpath \
    -ldflags "-s -w -X main.VERSION=$LOCALPATH_VERSION" \
    -o "$LOCALPATH_BIN.tmp/local-path-provisioner" github.com/rancher/local-path-provisioner)
  rm -rf "$LOCALPATH_BIN"; mv "$LOCALPATH_BIN.tmp" "$LOCALPATH_BIN"
}

# ---- containerd 2 (rows with a containerd version) -------------------------------------------
# Static (CGO_ENABLED=0: the btrfs snapshotter, the one cgo part, drops out by its build tag),
# like upstream's static release; the shim with no_grpc as upstream builds it.
CONTAINERD_CMDS=(containerd containerd-shim-runc-v2 ctr)
CONTAINERD_BIN=$BIN/containerd/$CONTAINERD_VERSION
step_containerd() {
  local src tmp=$CONTAINERD_BIN.tmp m=github.com/containerd/containerd/v2
  src=$(modsrc containerd "$CONTAINERD_VERSION")
  check_require "$src" "$m" "$CONTAINERD_VERSION"
  gomod "$src"
  rm -rf "$tmp"; mkdir -p "$tmp"
  local ld="-s -w -X $m/version.Version=$CONTAINERD_VERSION -X $m/version.Revision=gauntlet-module-build"
  (cd "$src" && "${NICE[@]}" go build -trimpath -tags "urfave_cli_no_docs osusergo netgo static_build" \
    -ldflags "$ld -extldflags -static" -o "$tmp/" "$m/cmd/containerd" "$m/cmd/ctr")
  (cd "$src" && "${NICE[@]}" go build -trimpath -tags "urfave_cli_no_docs osusergo netgo static_build no_grpc" \
    -ldflags "$ld -extldflags -static" -o "$tmp/" "$m/cmd/containerd-shim-runc-v2")
  grep -q "containerd $m $CONTAINERD_VERSION" <<<"$("$tmp/containerd" --version)"
  rm -rf "$CONTAINERD_BIN"; mv "$tmp" "$CONTAINERD_BIN"
}

# ---- podnet (rows whose network is podnet) ---------------------------------------------------
# src/podnet: gives each node's pods its pod range and routes the other nodes' ranges, like
# kindnetd (not served by the module proxy here). Its image tag is the hash of its source.
podnet_hash() { (cd "$ROOT/src/podnet" && cat go.mod go.sum ./*.go) | sha256sum | cut -c1-12; }
PODNET_IMAGE=
PODNET_BIN=
if [ "$NETWORK" = podnet ]; then
  PODNET_IMAGE=gauntlet.dev/podnet:$(podnet_hash)
  PODNET_BIN=$BIN/podnet/${PODNET_IMAGE##*:}
fi
step_podnet() {
  gomod src/podnet
  mkdir -p "$PODNET_BIN.tmp"
  (cd src/podnet && "${NICE[@]}" go vet . && "${NICE[@]}" go test -count=1 . >/dev/null \
    && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$PODNET_BIN.tmp/podnet" .)
  rm -rf "$PODNET_BIN"; mv "$PODNET_BIN.tmp" "$PODNET_BIN"
}

# ---- kind CLI -------------------------------------------------------------------------------
KIND_BIN=$BIN/kind-cli/$KIND_VERSION
# bin/node/kind: the newest kind CLI built (a newer kind creates the older versions' clusters).
link_newest_kind() {
  local newest
  newest=$(find "$BIN/kind-cli" -mindepth 2 -maxdepth 2 -name kind -type f | sort -V | tail -1)
  ln -sfn "${newest#"$BIN"/}" "$BIN/kind"
}
step_kindcli() {
  mkdir -p "$KIND_BIN"
  GOBIN=$KIND_BIN "${NICE[@]}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
  link_newest_kind
  "$BIN/kind" version
}

# ---- step (g): Debian rootfs images and the kind base ---------------------------------------
NODE_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,iptables,nftables,iproute2,ethtool,socat,conntrack,mount,util-linux,ca-certificates,kmod,procps,libseccomp2,pigz,jq,bash,fuse-overlayfs,containernetworking-plugins,ebtables
SLIM_PACKAGES=iptables,nftables,conntrack,ipset,kmod,iproute2
SLIM_IMAGE=gauntlet.dev/debian-slim:${DEBIAN_SUITE}

# debootstrap_import DIR PACKAGES TAG: minbase rootfs with PACKAGES, trimmed, imported as TAG.
debootstrap_import() {
  local dir=$1 packages=$2 tag=$3
  command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
  rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
  "${NICE[@]}" debootstrap --variant=minbase --include="$packages" "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR" \
    > "$dir.debootstrap.log" 2>&1 || { tail -20 "$dir.debootstrap.log"; return 1; }
  # trim: package caches, apt lists, docs except copyrights, man pages, locales
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log \
    "$dir"/usr/share/man "$dir"/usr/share/info "$dir"/usr/share/locale/*
  find "$dir/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
  tar -C "$dir" --numeric-owner -c . | docker import -c 'CMD ["/bin/bash"]' - "$tag" >/dev/null
  rm -rf "$dir"   # the image is the output; the tree is not needed any more
}

step_rootfs() { debootstrap_import "$WORK/rootfs-node" "$NODE_PACKAGES" "$BASE_ROOTFS_IMAGE"; }
step_slimfs() { debootstrap_import "$WORK/rootfs-slim" "$SLIM_PACKAGES" "$SLIM_IMAGE"; }

step_kindbase() {
  local kind_dir ctx=$WORK/ctx/kind-base
  kind_dir=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)
  [ -d "$kind_dir/images/base/files" ]
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp -r "$kind_dir/images/base/files" "$ctx/files"
  rm -rf "$ctx/files/LICENSES"
  chmod -R u+w "$ctx/files"
  find "$ctx/files" -type d -exec chmod 0755 {} +
  find "$ctx/files" -type f -exec chmod 0644 {} +
  chmod 0755 "$ctx"/files/usr/local/bin/* "$ctx"/files/kind/bin/*
  if [ "$CONTAINERD_VERSION" != debian ]; then
    # containerd 2 from bin/node/containerd; its config (version 3) is written per node
    # image by step node; no CNI config: podnet writes each node's.
    rm -f "$ctx/files/etc/containerd/config.toml"
    mkdir -p "$ctx/containerd"
    cp "${CONTAINERD_CMDS[@]/#/$CONTAINERD_BIN/}" "$ctx/containerd/"
    cp "$ROOT/files/kind-base-containerd2.Dockerfile" "$ctx/Dockerfile"
    quiet_build --build-arg "ROOTFS=$BASE_ROOTFS_IMAGE" --label "gauntlet.dev/inputs=$(inputs_hash)" -t "$KIND_BASE_IMAGE" "$ctx"
    return
  fi
  # our additions: single-node bridge CNI config, containerd settings for this VM
  mkdir -p "$ctx/files/etc/cni/net.d"
  install -m 0644 "$ROOT/files/10-gauntlet-bridge.conflist" "$ctx/files/etc/cni/net.d/"
  sed -i -e 's/^\( *restrict_oom_score_adj\) = false/\1 = true/' \
         -e "s#^\( *sandbox_image\) = .*#\1 = \"$REG/pause:$PAUSE_VERSION\"#" \
         "$ctx/files/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$ctx/files/etc/containerd/config.toml"
  cp "$ROOT/files/kind-base.Dockerfile" "$ctx/Dockerfile"
  quiet_build --build-arg "ROOTFS=$BASE_ROOTFS_IMAGE" --label "gauntlet.dev/inputs=$(inputs_hash)" -t "$KIND_BASE_IMAGE" "$ctx"
}

# ---- step (h): component images -------------------------------------------------------------
# scratch_image TAG BINARY [USER]: FROM scratch image with BINARY in /usr/local/bin.
scratch_image() {
  local tag=$1 bin=$2 user=${3:-} name ctx
  name=$(basename "$bin"); ctx=$WORK/ctx/img-$name
  rm -rf "$ctx"; mkdir -p "$ctx"; cp "$bin" "$ctx/"
  { echo "FROM scratch"
    echo "COPY $name /usr/local/bin/$name"
    echo "ENV PATH=/usr/local/bin"
    [ -z "$user" ] || echo "USER $user"
    echo "ENTRYPOINT [\"/usr/local/bin/$name\"]"
  } > "$ctx/Dockerfile"
  quiet_build -t "$tag" "$ctx"
}

# debian_image TAG [BINARY]: image FROM the slim Debian rootfs, optionally with BINARY.
debian_image() {
  local tag=$1 bin=${2:-} ctx
  ctx=$WORK/ctx/img-$(echo "$tag" | tr '/:' '__'); rm -rf "$ctx"; mkdir -p "$ctx"
  echo "FROM $SLIM_IMAGE" > "$ctx/Dockerfile"
  if [ -n "$bin" ]; then
    cp "$bin" "$ctx/"; echo "COPY $(basename "$bin") /usr/local/bin/$(basename "$bin")" >> "$ctx/Dockerfile"
  fi
  quiet_build -t "$tag" "$ctx"
}

image_list() {
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do echo "$REG/$c:$K8S_VERSION"; done
  echo "$REG/etcd:$ETCD_IMAGE_TAG"
  echo "$REG/coredns/coredns:$COREDNS_VERSION"
  echo "$REG/pause:$PAUSE_VERSION"
  echo "$LOCALPATH_IMAGE"
  echo "$HELPER_IMAGE"
  [ -z "$PODNET_IMAGE" ] || echo "$PODNET_IMAGE"
}

step_images() {
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    have_image "$REG/$c:$K8S_VERSION" || scratch_image "$REG/$c:$K8S_VERSION" "$K8S_BIN/$c"
  done
  have_image "$REG/kube-proxy:$K8S_VERSION" || debian_image "$REG/kube-proxy:$K8S_VERSION" "$K8S_BIN/kube-proxy"
  have_image "$REG/etcd:$ETCD_IMAGE_TAG" || scratch_image "$REG/etcd:$ETCD_IMAGE_TAG" "$ETCD_BIN/etcd"
  have_image "$REG/coredns/coredns:$COREDNS_VERSION" || scratch_image "$REG/coredns/coredns:$COREDNS_VERSION" "$COREDNS_BIN/coredns"
  have_image "$REG/pause:$PAUSE_VERSION" || scratch_image "$REG/pause:$PAUSE_VERSION" "$PAUSE_BIN/pause" 65535:65535
  have_image "$LOCALPATH_IMAGE" || scratch_image "$LOCALPATH_IMAGE" "$LOCALPATH_BIN/local-path-provisioner"
  have_image "$HELPER_IMAGE" || debian_image "$HELPER_IMAGE"
  # podnet runs ip and iptables: the slim Debian image has both
  [ -z "$PODNET_IMAGE" ] || have_image "$PODNET_IMAGE" || debian_image "$PODNET_IMAGE" "$PODNET_BIN/podnet"
  # check kubeadm agrees with the tags we built
  local want; want=$("$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
  for c in $want; do have_image "$c" || { echo "kubeadm wants $c, which was not built" >&2; return 1; }; done
}

# node_ctr CONTAINER ARGS...: ctr in the build container, stdin passed on, without the
# cgroup v1 deprecation warning containerd 2's ctr prints on every call on these hosts.
node_ctr() {
  local c=$1 err rc=0; shift
  err=$(mktemp)
  docker exec -i "$c" ctr "$@" 2>"$err" || rc=$?
  grep -v 'support for cgroup v1 is deprecated' "$err" >&2 || true
  rm -f "$err"
  return $rc
}

# ---- step (i): the node image ---------------------------------------------------------------
step_node() {
  local b=gauntlet-nodebuild-$$ img
  docker rm -f "$b" >/dev/null 2>&1 || true
  # shellcheck disable=SC2064 # $b is expanded now on purpose: this call's container
  trap "docker rm -f $b >/dev/null 2>&1 || true" EXIT
  # --init: a real PID 1 reaps containerd when we stop it (sleep would leave a zombie)
  docker run -d --init --name "$b" --privileged --entrypoint=sleep "$KIND_BASE_IMAGE" infinity >/dev/null
  local c
  for c in kubeadm kubelet kubectl; do docker cp "$K8S_BIN/$c" "$b:/usr/bin/$c"; done
  docker cp "$CRICTL_BIN/crictl" "$b:/usr/local/bin/crictl"
  docker exec "$b" mkdir -p /kind/manifests
  echo "$K8S_VERSION" | docker exec -i "$b" sh -c 'cat > /kind/version'
  sed -e "s#@PROVISIONER_IMAGE@#$LOCALPATH_IMAGE#g" -e "s#@HELPER_IMAGE@#$HELPER_IMAGE#g" \
    "$ROOT/files/default-storage.yaml" | docker exec -i "$b" sh -c 'cat > /kind/manifests/default-storage.yaml'
  if [ "$CONTAINERD_VERSION" != debian ]; then
    sed -e "s#@SANDBOX_IMAGE@#$REG/pause:$PAUSE_VERSION#g" "$ROOT/files/containerd2-config.toml" \
      | docker exec -i "$b" sh -c 'cat > /etc/containerd/config.toml'
  fi
  if [ "$NETWORK" = podnet ]; then
    # kind applies this unless the cluster's config sets networking.disableDefaultCNI
    sed -e "s#@PODNET_IMAGE@#$PODNET_IMAGE#g" "$ROOT/files/podnet.yaml" \
      | docker exec -i "$b" sh -c 'cat > /kind/manifests/default-cni.yaml'
  fi
  # start containerd, import every image tar (pinned, like kind's builder), stop it cleanly
  docker exec "$b" sh -c 'containerd > /tmp/containerd.log 2>&1 & echo $! > /tmp/containerd.pid'
  local i
  for i in $(seq 1 60); do docker exec "$b" ctr version >/dev/null 2>&1 && break; sleep 0.5; done
  for img in $(image_list); do
    docker save "$img" | node_ctr "$b" -n k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
  done
  node_ctr "$b" -n k8s.io images ls -q > "$WORK/node-images.txt"
  for img in $(image_list); do
    grep -qx "$img" "$WORK/node-images.txt" || { echo "missing in node: $img" >&2; return 1; }
  done
  docker exec "$b" sh -c 'p=$(cat /tmp/containerd.pid); kill $p; for i in $(seq 1 150); do [ -d /proc/$p ] || break; sleep 0.2; done; [ ! -d /proc/$p ] && rm -f /tmp/containerd.pid /tmp/containerd.log'
  local old; old=$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || true)
  docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'CMD []' \
    --change "LABEL gauntlet.dev/inputs=$(inputs_hash)" \
    "$b" "$NODE_IMAGE" >/dev/null
  docker rm -f "$b" >/dev/null
  trap - EXIT
  # drop the previous build of this tag if nothing else refers to it
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")" ]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

# ---- check: what the node image holds, on every run ------------------------------------------
# verify_node: the image's Kubernetes, kubelet, kubeadm, containerd, crictl and manifests are
# the versions this build names, whether it was built now or reused; a cached image made by a
# broken step fails here, not in a cluster. Outputs are captured first: no cmd | grep -q under
# pipefail (grep's early exit kills the writer with SIGPIPE).
verify_node() {
  local out want_ctr
  out=$(docker run --rm --entrypoint /bin/sh "$NODE_IMAGE" -c \
    'cat /kind/version; kubelet --version; kubeadm version -o short; containerd --version; crictl --version; ls /kind/manifests' 2>&1 \
    | grep -v 'cgroup v1') || { echo "error: $NODE_IMAGE: cannot run its binaries: $out" >&2; return 1; }
  want_ctr=$CONTAINERD_VERSION
  [ "$want_ctr" != debian ] || want_ctr=1.6.
  local want=("$K8S_VERSION" "Kubernetes $K8S_VERSION" "containerd github.com/containerd/containerd" " $want_ctr"
    "crictl version $CRICTL_VERSION" default-storage.yaml)
  [ "$NETWORK" != podnet ] || want+=(default-cni.yaml)
  local w
  for w in "${want[@]}"; do
    if [[ $out != *"$w"* ]]; then
      echo "error: $NODE_IMAGE does not hold what this build makes: no \"$w\" in" >&2
      sed 's/^/  /' <<<"$out" >&2
      return 1
    fi
  done
  [ "$(sed -n 1p <<<"$out")" = "$K8S_VERSION" ] || { echo "error: $NODE_IMAGE's /kind/version is $(sed -n 1p <<<"$out"), not $K8S_VERSION" >&2; return 1; }
  log "checked $NODE_IMAGE: Kubernetes $K8S_VERSION, containerd $want_ctr, crictl $CRICTL_VERSION, manifests $(tail -n +6 <<<"$out" | tr '\n' ' ')"
}

# ---- main -------------------------------------------------------------------------------
STEPS=(k8s etcd coredns pause crictl localpath)
[ "$CONTAINERD_VERSION" = debian ] || STEPS+=(containerd)
[ "$NETWORK" != podnet ] || STEPS+=(podnet)
STEPS+=(kindcli rootfs slimfs kindbase images node)
declare -A DESC=(
  [k8s]="(a) Kubernetes $K8S_VERSION binaries (${K8S_CMDS[*]})"
  [etcd]="(b) etcd $ETCD_VERSION"
  [coredns]="(c) CoreDNS $COREDNS_VERSION"
  [pause]="(d) pause $PAUSE_VERSION (own Go program)"
  [crictl]="(e) crictl $CRICTL_VERSION"
  [localpath]="(f) local-path-provisioner $LOCALPATH_VERSION"
  [containerd]="(f) containerd $CONTAINERD_VERSION (${CONTAINERD_CMDS[*]})"
  [podnet]="(f) podnet ${PODNET_IMAGE##*:} (src/podnet)"
  [kindcli]="kind CLI $KIND_VERSION"
  [rootfs]="(g) Debian $DEBIAN_SUITE node rootfs (debootstrap) -> $BASE_ROOTFS_IMAGE"
  [slimfs]="(g) Debian $DEBIAN_SUITE slim rootfs (debootstrap) -> $SLIM_IMAGE"
  [kindbase]="(g) kind base image -> $KIND_BASE_IMAGE"
  [images]="(h) component images"
  [node]="(i) node image -> $NODE_IMAGE"
)
declare -A DONE_IF=(
  [k8s]='have_files "${K8S_CMDS[@]/#/$K8S_BIN/}"'
  [etcd]='have_files "$ETCD_BIN/etcd"'
  [coredns]='have_files "$COREDNS_BIN/coredns"'
  [pause]='have_files "$PAUSE_BIN/pause"'
  [crictl]='have_files "$CRICTL_BIN/crictl"'
  [localpath]='have_files "$LOCALPATH_BIN/local-path-provisioner"'
  [containerd]='have_files "${CONTAINERD_CMDS[@]/#/$CONTAINERD_BIN/}"'
  [podnet]='have_files "$PODNET_BIN/podnet"'
  [kindcli]='have_files "$KIND_BIN/kind" && [ -L "$BIN/kind" ]'
  [rootfs]='have_image "$BASE_ROOTFS_IMAGE"'
  [slimfs]='have_image "$SLIM_IMAGE"'
  [kindbase]='have_current "$KIND_BASE_IMAGE"'
  [images]='all_images_present'
  [node]='have_current "$NODE_IMAGE"'
)
all_images_present() { local i; for i in $(image_list); do have_image "$i" || return 1; done; }

main() {
  case "${1:-}" in
    --list) printf '%s\n' "${STEPS[@]}"; return;;
    --versions) grep -v '^$' <<<"$VERSIONS"; return;;
  esac
  local want=("$@") s
  if [ ${#want[@]} -eq 0 ] && have_current "$NODE_IMAGE"; then
    # The product is there and built from these files: nothing else is needed.
    log "reusing $NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%.2f GB", $1/1e9}'))"
    verify_node
    return
  fi
  [ ${#want[@]} -gt 0 ] || want=("${STEPS[@]}")
  mkdir -p "$BIN" "$WORK"
  local t0; t0=$(date +%s)
  for s in "${want[@]}"; do
    [[ " ${STEPS[*]} " == *" $s "* ]] || { echo "unknown step for $K8S_VERSION: $s (try $0 $K8S_VERSION --list)" >&2; exit 2; }
    if eval "${DONE_IF[$s]}"; then
      skip_step "$s" "${DESC[$s]}" "output exists"
    else
      run_step "$s" "${DESC[$s]}" "step_$s"
    fi
  done
  if [[ " ${want[*]} " == *" node "* ]]; then
    verify_node
  fi
  log "all requested steps finished in $(fmt_dur $(( $(date +%s) - t0 )))"
}
main "$@"
