#!/usr/bin/env bash
# Runs one CI tier, as the GitHub Actions matrix does:
#
#   ci/tier.sh unit          lint, generated files, build, unit, etcd and simulation tiers
#   ci/tier.sh campaigns     the view scenarios of every example and the explore campaign (envtest)
#   ci/tier.sh integration   envtest at KUBERNETES_VERSION (built from Go modules, cached in bin/)
#   ci/tier.sh e2e           the whole e2e suite on kind at KUBERNETES_VERSION's minor
#   ci/tier.sh e2e-smoke     the e2e smoke (one 3-member cluster Available with data, deleted
#                            with its snapshot) on kind at KUBERNETES_VERSION's minor
#   ci/tier.sh chaos-one     one chaos scenario (leader-pod-kill) through the gauntlet CLI on kind
#                            at KUBERNETES_VERSION's minor
#   ci/tier.sh chaos         `make chaos`: every chaos scenario through the gauntlet CLI on kind
#                            at KUBERNETES_VERSION's minor (default: the Makefile's
#                            KIND_NODE_VERSION); report in artifacts/chaos-ci/
#
# KUBERNETES_VERSION defaults to the Makefile's (KIND_NODE_VERSION for chaos). The kind tiers
# take the images gauntlet run would (settle_images): kind's node image for the minor and Chaos
# Mesh's release images when a registry answers, else the ones built here from Go modules and
# Debian packages (also with GAUNTLET_OFFLINE=1), saying which and why. The operator and etcd
# images are always built here. ci/matrix.sh (make matrix) runs integration, e2e-smoke and
# chaos-one on every minor.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${1:?usage: ci/tier.sh unit|campaigns|integration|e2e|e2e-smoke|chaos-one|chaos}
start=$(date +%s)
echo ">> $(date +%H:%M:%S) tier $tier (KUBERNETES_VERSION=${KUBERNETES_VERSION:-Makefile default})"

# settle_images VERSION: sets NODE_IMAGE, KIND_CONFIG, CHAOS_CONTROLLER_IMAGE and
# CHAOS_DAEMON_IMAGE as gauntlet run settles them for that Kubernetes version (`gauntlet
# images`: kind's and Chaos Mesh's upstream images when the engine has them or pulls them,
# else the ones built here; GAUNTLET_OFFLINE=1 pulls nothing; it says which and why), and
# builds the node image when it is the one built here.
settle_images() {
	make --no-print-directory gauntlet
	local out k v
	out=$(bin/gauntlet images --kubernetes-version "$1")
	while IFS='=' read -r k v; do
		case $k in NODE_IMAGE | KIND_CONFIG | CHAOS_CONTROLLER_IMAGE | CHAOS_DAEMON_IMAGE) export "$k=$v" ;; esac
	done <<<"$out"
	if [[ $NODE_IMAGE == gauntlet.dev/* ]]; then
		make node-image KUBERNETES_VERSION="${NODE_IMAGE##*:}"
	fi
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# What the Chaos Mesh image build (tools/images/chaosmesh/build.sh) needs from an Ubuntu runner
# (GitHub's ubuntu-24.04) beyond what its image has (Go from setup-go; gcc with a static libc,
# jq, file, findmnt and a running Docker engine come with it). Its rootfs step debootstraps
# Debian bookworm, which needs:
#  - debootstrap, absent from the runner image. build.sh would apt-get it itself, but only as
#    root. Ubuntu's debootstrap knows bookworm (scripts/bookworm -> sid).
#  - debian-archive-keyring: debootstrap checks bookworm's Release signature against
#    /usr/share/keyrings/debian-archive-keyring.gpg, which Ubuntu does not ship by default;
#    without it debootstrap only warns and installs unverified packages.
#  - root, for debootstrap, chroot, umount and reading the whole tree for `docker import`; the
#    runner's user is not root. So that one step runs here under sudo, after creating its work
#    directory as the user; `make chaos-images` then runs every other step as the user (Go
#    caches and bin/ stay the user's) and skips the rootfs, whose image is current.
# chaos-daemon (cgo) links against the build host's glibc, 2.39 here against bookworm's 2.36 in
# the image: the symbols it imports need GLIBC_2.34 at most, and build.sh runs it in the image.
# On a root Debian machine this installs the same two packages if missing, without sudo.
chaos_rootfs() {
	if ! dpkg -s debootstrap debian-archive-keyring >/dev/null 2>&1; then
		echo ">> $(date +%H:%M:%S) installing debootstrap and debian-archive-keyring for the Chaos Mesh daemon's Debian rootfs"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			debootstrap debian-archive-keyring >/dev/null
	fi
	mkdir -p bin/chaos-mesh/work
	as_root tools/images/chaosmesh/build.sh rootfs
}

case $tier in
unit) make lint verify-generated build test-unit test-etcd test-sim ;;
campaigns) make test-campaigns ;;
integration) make test-int ${KUBERNETES_VERSION:+KUBERNETES_VERSION=$KUBERNETES_VERSION} ;;
e2e)
	make docker-engine
	settle_images "${KUBERNETES_VERSION:?KUBERNETES_VERSION is required for the e2e tier}"
	make test-e2e NODE_IMAGE="$NODE_IMAGE" KIND_CONFIG="$KIND_CONFIG"
	;;
e2e-smoke)
	make docker-engine
	settle_images "v${KUBERNETES_VERSION#v}"
	make test-e2e-smoke NODE_IMAGE="$NODE_IMAGE" KIND_CONFIG="$KIND_CONFIG"
	;;
chaos-one)
	make docker-engine
	settle_images "v${KUBERNETES_VERSION#v}"
	# As root the CLI builds every Chaos Mesh image step itself; a runner's user needs the
	# rootfs step under sudo first (chaos_rootfs), when Chaos Mesh's images are built here.
	if [ "$(id -u)" != 0 ] && [[ $CHAOS_CONTROLLER_IMAGE == gauntlet.dev/* ]]; then chaos_rootfs; fi
	make chaos NODE_IMAGE="$NODE_IMAGE" KIND_CONFIG="$KIND_CONFIG" \
		ARGS="--scenario leader-pod-kill --seed 1 --report artifacts/chaos-one-v${KUBERNETES_VERSION#v}"
	;;
chaos)
	# GitHub's runners' kernels have netem, so the 100 ms delay and 30 % loss scenarios run
	# there. Nothing to configure: the runner probes the node's kernel itself (chaos/node.go)
	# and reports a scenario whose feature is missing as skipped, with the reason, never passed.
	make docker-engine
	settle_images "${KUBERNETES_VERSION:-$(sed -n 's/^KIND_NODE_VERSION *?= *//p' Makefile)}"
	if [[ $CHAOS_CONTROLLER_IMAGE == gauntlet.dev/* ]]; then chaos_rootfs; fi
	make chaos NODE_IMAGE="$NODE_IMAGE" KIND_CONFIG="$KIND_CONFIG" ARGS="--report artifacts/chaos-ci"
	;;
*) echo "unknown tier $tier: unit, integration, e2e, e2e-smoke, chaos-one or chaos" >&2; exit 2 ;;
esac
echo ">> $(date +%H:%M:%S) tier $tier passed in $(( $(date +%s) - start ))s"
