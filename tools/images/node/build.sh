#!/usr/bin/env bash
# Builds the kind node image for the e2e tier offline, from Go modules and Debian
# packages only: no container registry is contacted (see ../shared/DESIGN.md, "kind node
# image, offline", for why each step is what it is).
#
#   tools/images/node/build.sh v1.35.4            every step, for that Kubernetes version
#   tools/images/node/build.sh v1.35.4 k8s etcd   only the named steps
#   tools/images/node/build.sh --list             the steps
#
# Every step skips itself when its output exists: binaries by version under
# bin/node/<component>/<version>/, images by tag (`docker image inspect`); the kind base
# and node images also carry a hash of files/ and rebuild when it changes. Delete an
# output (or `docker rmi` a tag) to force a rebuild. Each step prints one progress line
# with its duration. Only v1.35.4 is supported: Debian's containerd 1.6 serves
# Kubernetes up to 1.35; 1.36+ needs containerd 2.x built from its Go module.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$ROOT/../../.." && pwd)
cd "$ROOT"
# The wrapper modules under src/ are modules of their own.
export GOWORK=off

# ---- versions ---------------------------------------------------------------------------
K8S_VERSION=v1.35.4          # k8s.io/kubernetes; staging modules at v0.35.4
ETCD_VERSION=v3.6.6          # kubeadm v1.35.4 names registry.k8s.io/etcd:3.6.6-0
ETCD_IMAGE_TAG=3.6.6-0
COREDNS_VERSION=v1.13.1      # kubeadm v1.35.4 names registry.k8s.io/coredns/coredns:v1.13.1
PAUSE_VERSION=3.10.1         # kubeadm v1.35.4 names registry.k8s.io/pause:3.10.1
CRICTL_VERSION=v1.36.0       # sigs.k8s.io/cri-tools (v1.35.x is not served here)
LOCALPATH_VERSION=v0.0.30    # github.com/rancher/local-path-provisioner
KIND_VERSION=v0.31.0         # sigs.k8s.io/kind: CLI + images/base/files
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# ---- image tags -------------------------------------------------------------------------
REG=registry.k8s.io
BASE_ROOTFS_IMAGE=gauntlet.dev/bookworm-rootfs:${DEBIAN_SUITE}
KIND_BASE_IMAGE=gauntlet.dev/kind-base:${KIND_VERSION}-${DEBIAN_SUITE}
HELPER_IMAGE=gauntlet.dev/local-path-helper:${DEBIAN_SUITE}
LOCALPATH_IMAGE=gauntlet.dev/local-path-provisioner:${LOCALPATH_VERSION}
NODE_IMAGE=${NODE_IMAGE:-gauntlet.dev/kind-node:${K8S_VERSION}}

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

# dbuild ARGS...: legacy `docker build -q`, quiet unless it fails.
dbuild() {
  local err; err=$(mktemp)
  docker build -q "$@" >/dev/null 2>"$err" || { cat "$err" >&2; rm -f "$err"; return 1; }
  rm -f "$err"
}
# inputs_hash: short hash of the hand-written files baked into the base and node images;
# stored as an image label so that editing files/ rebuilds those images.
inputs_hash() { cat "$ROOT"/files/* | sha256sum | cut -c1-12; }
have_current_image() {
  [ "$(docker image inspect -f '{{index .Config.Labels "gauntlet.dev/inputs"}}' "$1" 2>/dev/null)" = "$(inputs_hash)" ]
}
have_files() { local f; for f in "$@"; do [ -x "$f" ] || return 1; done; }

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
  gomod src/k8s
  rm -rf "$tmp"; mkdir -p "$tmp"
  local pkgs=() c
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd src/k8s && "${NICE[@]}" go build -trimpath -tags providerless -ldflags "$(k8s_ldflags)" -o "$tmp/" "${pkgs[@]}")
  grep -qx "$K8S_VERSION" <<<"$("$tmp/kubeadm" version -o short)"
  rm -rf "$K8S_BIN"; mv "$tmp" "$K8S_BIN"
}

# ---- step (b): etcd -----------------------------------------------------------------------
ETCD_BIN=$BIN/etcd/$ETCD_VERSION
step_etcd() {
  gomod src/etcd
  mkdir -p "$ETCD_BIN.tmp"
  (cd src/etcd && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$ETCD_BIN.tmp/etcd" .)
  grep -q "etcd Version: ${ETCD_VERSION#v}" <<<"$("$ETCD_BIN.tmp/etcd" --version)"
  rm -rf "$ETCD_BIN"; mv "$ETCD_BIN.tmp" "$ETCD_BIN"
}

# ---- step (c): CoreDNS ----------------------------------------------------------------------
COREDNS_BIN=$BIN/coredns/$COREDNS_VERSION
step_coredns() {
  gomod src/coredns
  mkdir -p "$COREDNS_BIN.tmp"
  (cd src/coredns && "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$COREDNS_BIN.tmp/coredns" github.com/coredns/coredns)
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

# ---- kind CLI -------------------------------------------------------------------------------
KIND_BIN=$BIN/kind-cli/$KIND_VERSION
step_kindcli() {
  mkdir -p "$KIND_BIN"
  GOBIN=$KIND_BIN "${NICE[@]}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
  ln -sfn "kind-cli/$KIND_VERSION/kind" "$BIN/kind"
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
  # our additions: single-node bridge CNI config, containerd settings for this VM
  mkdir -p "$ctx/files/etc/cni/net.d"
  install -m 0644 "$ROOT/files/10-gauntlet-bridge.conflist" "$ctx/files/etc/cni/net.d/"
  sed -i -e 's/^\( *restrict_oom_score_adj\) = false/\1 = true/' \
         -e "s#^\( *sandbox_image\) = .*#\1 = \"$REG/pause:$PAUSE_VERSION\"#" \
         "$ctx/files/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$ctx/files/etc/containerd/config.toml"
  cp "$ROOT/files/kind-base.Dockerfile" "$ctx/Dockerfile"
  dbuild --build-arg "ROOTFS=$BASE_ROOTFS_IMAGE" --label "gauntlet.dev/inputs=$(inputs_hash)" -t "$KIND_BASE_IMAGE" "$ctx"
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
  dbuild -t "$tag" "$ctx"
}

# debian_image TAG [BINARY]: image FROM the slim Debian rootfs, optionally with BINARY.
debian_image() {
  local tag=$1 bin=${2:-} ctx
  ctx=$WORK/ctx/img-$(echo "$tag" | tr '/:' '__'); rm -rf "$ctx"; mkdir -p "$ctx"
  echo "FROM $SLIM_IMAGE" > "$ctx/Dockerfile"
  if [ -n "$bin" ]; then
    cp "$bin" "$ctx/"; echo "COPY $(basename "$bin") /usr/local/bin/$(basename "$bin")" >> "$ctx/Dockerfile"
  fi
  dbuild -t "$tag" "$ctx"
}

image_list() {
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do echo "$REG/$c:$K8S_VERSION"; done
  echo "$REG/etcd:$ETCD_IMAGE_TAG"
  echo "$REG/coredns/coredns:$COREDNS_VERSION"
  echo "$REG/pause:$PAUSE_VERSION"
  echo "$LOCALPATH_IMAGE"
  echo "$HELPER_IMAGE"
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
  # check kubeadm agrees with the tags we built
  local want; want=$("$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
  for c in $want; do have_image "$c" || { echo "kubeadm wants $c, which was not built" >&2; return 1; }; done
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
  # start containerd, import every image tar (pinned, like kind's builder), stop it cleanly
  docker exec "$b" sh -c 'containerd > /tmp/containerd.log 2>&1 & echo $! > /tmp/containerd.pid'
  local i
  for i in $(seq 1 60); do docker exec "$b" ctr version >/dev/null 2>&1 && break; sleep 0.5; done
  for img in $(image_list); do
    docker save "$img" | docker exec -i "$b" ctr -n k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
  done
  docker exec "$b" ctr -n k8s.io images ls -q > "$WORK/node-images.txt"
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

# ---- main -------------------------------------------------------------------------------
STEPS=(k8s etcd coredns pause crictl localpath kindcli rootfs slimfs kindbase images node)
declare -A DESC=(
  [k8s]="(a) Kubernetes $K8S_VERSION binaries (${K8S_CMDS[*]})"
  [etcd]="(b) etcd $ETCD_VERSION"
  [coredns]="(c) CoreDNS $COREDNS_VERSION"
  [pause]="(d) pause $PAUSE_VERSION (own Go program)"
  [crictl]="(e) crictl $CRICTL_VERSION"
  [localpath]="(f) local-path-provisioner $LOCALPATH_VERSION"
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
  [kindcli]='have_files "$KIND_BIN/kind" && [ -L "$BIN/kind" ]'
  [rootfs]='have_image "$BASE_ROOTFS_IMAGE"'
  [slimfs]='have_image "$SLIM_IMAGE"'
  [kindbase]='have_current_image "$KIND_BASE_IMAGE"'
  [images]='all_images_present'
  [node]='have_current_image "$NODE_IMAGE"'
)
all_images_present() { local i; for i in $(image_list); do have_image "$i" || return 1; done; }

main() {
  if [ "${1:-}" = --list ]; then printf '%s\n' "${STEPS[@]}"; return; fi
  if [[ "${1:-}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    [ "$1" = "$K8S_VERSION" ] || { echo "error: this build supports Kubernetes $K8S_VERSION only, not $1 (see the header)" >&2; exit 2; }
    shift
  fi
  local want=("$@") s
  if [ ${#want[@]} -eq 0 ] && have_current_image "$NODE_IMAGE"; then
    # The product is there and built from these files: nothing else is needed.
    log "reusing $NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%.2f GB", $1/1e9}'))"
    return
  fi
  [ ${#want[@]} -gt 0 ] || want=("${STEPS[@]}")
  mkdir -p "$BIN" "$WORK"
  local t0; t0=$(date +%s)
  for s in "${want[@]}"; do
    [ -n "${DESC[$s]:-}" ] || { echo "unknown step: $s (try --list)" >&2; exit 2; }
    if eval "${DONE_IF[$s]}"; then
      skip_step "$s" "${DESC[$s]}" "output exists"
    else
      run_step "$s" "${DESC[$s]}" "step_$s"
    fi
  done
  log "all requested steps finished in $(fmt_dur $(( $(date +%s) - t0 )))"
}
main "$@"
