#!/usr/bin/env bash
# Builds Gauntlet's container images from binaries built here, offline: no
# base image is pulled (all are FROM scratch). Each image is tagged by
# version and skipped when already present.
#
#   tools/images/build.sh operator <tag>          bin/manager, bin/backup -> gauntlet.dev/operator:<tag>
#                                                 ($MANAGER_BIN, $BACKUP_BIN instead when set)
#   tools/images/build.sh etcd <etcd-version>     bin/etcd/<version>/ -> gauntlet.dev/etcd:<etcd-version>
#   tools/images/build.sh versitygw <version>     bin/versitygw/<version>/ -> gauntlet.dev/versitygw:<version>
#   tools/images/build.sh api-relay <tag>         bin/api-relay -> gauntlet.dev/api-relay:<tag>
#   tools/images/build.sh gauntlet <tag>          bin/gauntlet and envtest's kube-apiserver and etcd
#                                                 ($KUBEBUILDER_ASSETS) -> gauntlet.dev/gauntlet:<tag>
#
# All run as the non-root user 65532 and hold static binaries only.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
BIN="$ROOT/bin"
REPO="${IMAGE_REPO:-gauntlet.dev}"

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

build() { # build <image> <context dir> <dockerfile text>
	local image=$1 ctx=$2 dockerfile=$3
	if docker image inspect "$image" >/dev/null 2>&1; then
		log "reusing $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}'))"
		return
	fi
	log "building $image ..."
	local start=$SECONDS
	printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"
	# The output (and the legacy builder's deprecation notice) only matters
	# when the build fails.
	local out
	if ! out=$(docker build --quiet --tag "$image" "$ctx" 2>&1); then
		echo "$out" >&2
		exit 1
	fi
	log "building $image ... done in $((SECONDS - start))s ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}'))"
}

# check <image> <want> <args...>: run the image (built now or reused) with args and
# find want in what it prints, so that a broken image cannot hide behind its tag.
# The output is captured first: no cmd | grep -q under pipefail.
check() {
	local image=$1 want=$2 out
	shift 2
	out=$(docker run --rm "$@" 2>&1) || true
	if [[ $out != *"$want"* ]]; then
		echo "error: $image does not run as built: docker run --rm $* printed no \"$want\":" >&2
		sed 's/^/  /' <<<"$out" | head -20 >&2
		exit 1
	fi
	log "checked $image: $want"
}

static_or_die() { # static_or_die <binary>: FROM scratch has no libc
	command -v file >/dev/null || return 0
	if ! grep -q 'statically linked' <<<"$(file "$1")"; then
		echo "error: $1 is not a static binary (FROM scratch cannot run it): $(file "$1")" >&2
		exit 1
	fi
}

[ $# -eq 2 ] || usage
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
case $1 in
operator)
	manager=${MANAGER_BIN:-$BIN/manager}
	backup=${BACKUP_BIN:-$BIN/backup}
	for b in "$manager" "$backup"; do
		[ -x "$b" ] || { echo "error: $b is missing: run make manager" >&2; exit 1; }
		static_or_die "$b"
	done
	cp "$manager" "$ctx/manager"
	cp "$backup" "$ctx/backup"
	# /backup is what the scheduled backup Jobs run, in this same image.
	build "$REPO/operator:$2" "$ctx" 'FROM scratch
COPY manager /manager
COPY backup /backup
USER 65532:65532
ENTRYPOINT ["/manager"]'
	check "$REPO/operator:$2" "-metrics-bind-address" "$REPO/operator:$2" --help
	check "$REPO/operator:$2" "Usage of backup" --entrypoint /backup "$REPO/operator:$2" --help
	;;
etcd)
	dir="$BIN/etcd/$2"
	for b in etcd etcdctl etcdutl; do
		[ -x "$dir/$b" ] || { echo "error: $dir/$b is missing: run tools/bins/build.sh etcd $2" >&2; exit 1; }
		static_or_die "$dir/$b"
		cp "$dir/$b" "$ctx/$b"
	done
	# etcd's pod runs `etcd`, the snapshot and restore Jobs `etcdctl` and
	# `etcdutl`: all found on PATH. The data directory is a mounted volume.
	build "$REPO/etcd:$2" "$ctx" 'FROM scratch
COPY etcd etcdctl etcdutl /usr/local/bin/
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/etcd"]'
	check "$REPO/etcd:$2" "etcd Version: ${2#v}" "$REPO/etcd:$2" --version
	check "$REPO/etcd:$2" "etcdctl version: ${2#v}" --entrypoint /usr/local/bin/etcdctl "$REPO/etcd:$2" version
	check "$REPO/etcd:$2" "etcdutl version: ${2#v}" --entrypoint /usr/local/bin/etcdutl "$REPO/etcd:$2" version
	;;
versitygw)
	# The S3-compatible server the e2e backup test stores into (posix
	# backend on an emptyDir).
	b="$BIN/versitygw/$2/versitygw"
	[ -x "$b" ] || { echo "error: $b is missing: run tools/bins/build.sh versitygw $2" >&2; exit 1; }
	static_or_die "$b"
	cp "$b" "$ctx/versitygw"
	build "$REPO/versitygw:$2" "$ctx" 'FROM scratch
COPY versitygw /versitygw
USER 65532:65532
ENTRYPOINT ["/versitygw"]'
	check "$REPO/versitygw:$2" "Version  : $2" "$REPO/versitygw:$2" --version
	;;
api-relay)
	# The in-cluster end of the API proxy's tunnel (cmd/api-relay): it
	# holds no credentials and only splices bytes.
	b="$BIN/api-relay"
	[ -x "$b" ] || { echo "error: $b is missing: run make api-relay" >&2; exit 1; }
	static_or_die "$b"
	cp "$b" "$ctx/api-relay"
	build "$REPO/api-relay:$2" "$ctx" 'FROM scratch
COPY api-relay /api-relay
USER 65532:65532
ENTRYPOINT ["/api-relay"]'
	check "$REPO/api-relay:$2" "-listen" "$REPO/api-relay:$2" --help
	;;
gauntlet)
	# The CLI for a user's own repository or CI: validate, report and
	# replay files, run on --envtest (kube-apiserver and etcd inside) or
	# on a cluster its --kubeconfig reaches. Files are mounted at /work.
	assets=${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS to the folder with kube-apiserver and etcd (make envtest-bins)}
	mkdir -p "$ctx/bin" "$ctx/k8s" "$ctx/root/tmp"
	chmod 1777 "$ctx/root/tmp" # envtest's and the runs' temporary files; scratch has no /tmp
	for b in "$BIN/gauntlet" "$assets/kube-apiserver" "$assets/etcd"; do
		[ -x "$b" ] || { echo "error: $b is missing: run make gauntlet envtest-bins" >&2; exit 1; }
		static_or_die "$b"
	done
	cp "$BIN/gauntlet" "$ctx/bin/gauntlet"
	cp "$assets/kube-apiserver" "$assets/etcd" "$ctx/k8s/"
	build "$REPO/gauntlet:$2" "$ctx" 'FROM scratch
COPY bin/ /gauntlet/bin/
COPY k8s/ /gauntlet/k8s/
COPY root/ /
ENV KUBEBUILDER_ASSETS=/gauntlet/k8s PATH=/gauntlet/bin HOME=/tmp
USER 65532:65532
WORKDIR /work
ENTRYPOINT ["/gauntlet/bin/gauntlet"]'
	check "$REPO/gauntlet:$2" "Kubernetes: " "$REPO/gauntlet:$2" version
	;;
*) usage ;;
esac
