#!/usr/bin/env bash
# Runs one CI tier, as the GitHub Actions matrix does:
#
#   ci/tier.sh unit          lint, generated files, build, unit, etcd and simulation tiers
#   ci/tier.sh integration   envtest at KUBERNETES_VERSION (built from Go modules, cached in bin/)
#
# KUBERNETES_VERSION defaults to the Makefile's. The e2e tier joins the matrix
# when it exists (see the README's status table).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${1:?usage: ci/tier.sh unit|integration}
start=$(date +%s)
echo ">> $(date +%H:%M:%S) tier $tier (KUBERNETES_VERSION=${KUBERNETES_VERSION:-Makefile default})"
case $tier in
unit) make lint verify-generated build test-unit test-etcd test-sim ;;
integration) make test-int ${KUBERNETES_VERSION:+KUBERNETES_VERSION=$KUBERNETES_VERSION} ;;
*) echo "unknown tier $tier: unit or integration" >&2; exit 2 ;;
esac
echo ">> $(date +%H:%M:%S) tier $tier passed in $(( $(date +%s) - start ))s"
