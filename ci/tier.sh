#!/usr/bin/env bash
# Runs one CI tier, as the GitHub Actions matrix does:
#
#   ci/tier.sh unit          lint, generated files, build, unit, etcd and simulation tiers
#   ci/tier.sh integration   envtest at KUBERNETES_VERSION (built from Go modules, cached in bin/)
#   ci/tier.sh e2e           kind at KUBERNETES_VERSION's minor, from the upstream kindest/node
#                            image (GitHub's runners can pull it); the operator and etcd images
#                            are still built here from Go modules
#
# KUBERNETES_VERSION defaults to the Makefile's. Offline machines run the e2e tier with
# `make test-e2e`, which builds its own node image (v1.35.4 only).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${1:?usage: ci/tier.sh unit|integration|e2e}
start=$(date +%s)
echo ">> $(date +%H:%M:%S) tier $tier (KUBERNETES_VERSION=${KUBERNETES_VERSION:-Makefile default})"

# kindest/node images published with kind releases, by Kubernetes minor
# (kind v0.31.0 defaults to v1.35.0, kind v0.33.0 to v1.37.0; v1.36.1 was
# kind's default in between).
upstream_node_image() {
	case ${1:-} in
	v1.35.*) echo kindest/node:v1.35.0 ;;
	v1.36.*) echo kindest/node:v1.36.1 ;;
	v1.37.*) echo kindest/node:v1.37.0 ;;
	*) echo "no upstream kind node image known for Kubernetes '${1:-}'" >&2; return 1 ;;
	esac
}

case $tier in
unit) make lint verify-generated build test-unit test-etcd test-sim ;;
integration) make test-int ${KUBERNETES_VERSION:+KUBERNETES_VERSION=$KUBERNETES_VERSION} ;;
e2e)
	image=$(upstream_node_image "${KUBERNETES_VERSION:?KUBERNETES_VERSION is required for the e2e tier}")
	make test-e2e NODE_IMAGE="$image" KIND_CONFIG=fixtures/kind/upstream.yaml
	;;
*) echo "unknown tier $tier: unit, integration or e2e" >&2; exit 2 ;;
esac
echo ">> $(date +%H:%M:%S) tier $tier passed in $(( $(date +%s) - start ))s"
