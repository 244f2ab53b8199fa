#!/usr/bin/env bash
# Generates the Chaos Mesh CRDs into chaos/install/crds/ (one file per CRD, committed) with
# controller-gen, from the same Chaos Mesh api module the images are built against: the
# version is read from the api replace in src/go.mod, so the two cannot drift apart.
#
#   tools/images/chaosmesh/crds.sh                 write chaos/install/crds/
#   CONTROLLER_GEN=path/to/controller-gen crds.sh  another controller-gen (default: the repo's pin)
#
# Why not the main module's manifests/crd.yaml: it is older than the api module the binaries
# compile against and lacks NetworkChaos' partitionBehavior; the API server then prunes the
# field the webhook defaults, and every NetworkChaos sticks with "Cannot update chaos spec".
# The output depends only on the api module version and the controller-gen version, so a
# rerun followed by `git status --porcelain chaos/install/crds` checks it is up to date.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$ROOT/../../.." && pwd)
export GOWORK=off
# controller-gen loads the api packages with `go list`: never let it edit go.mod/go.sum
export GOFLAGS=-mod=readonly

API=github.com/chaos-mesh/chaos-mesh/api
CONTROLLER_GEN=${CONTROLLER_GEN:-$REPO/bin/controller-gen-$(sed -n 's/^CONTROLLER_GEN_VERSION *?= *//p' "$REPO/Makefile")}
DEST=$REPO/chaos/install/crds

log() { echo "$(date +%T) $*"; }

t0=$(date +%s)
[ -x "$CONTROLLER_GEN" ] || {
  echo "error: $CONTROLLER_GEN is missing: run 'make ${CONTROLLER_GEN#"$REPO"/}'" >&2
  exit 1
}
api_version=$(go mod edit -json "$ROOT/src/go.mod" | jq -r --arg p "$API" '.Replace[] | select(.Old.Path == $p) | .New.Version')
if [ -z "$api_version" ] || [ "$api_version" = null ]; then
  echo "error: no replace of $API in src/go.mod" >&2
  exit 1
fi
log "CRDs from $API@$api_version with $("$CONTROLLER_GEN" --version) ..."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
api_dir=$(cd "$tmp" && go mod download -json "$API@$api_version" | jq -r .Dir)
# controller-gen needs the api module as the main module, in a writable directory
# (the module cache is read-only)
cp -r "$api_dir" "$tmp/api"
chmod -R u+w "$tmp/api"
(cd "$tmp/api" && "$CONTROLLER_GEN" crd:ignoreUnexportedFields=true,crdVersions=v1 paths=./... \
  output:crd:artifacts:config="$tmp/out")
n=$(find "$tmp/out" -name '*.yaml' | wc -l)
[ "$n" -gt 0 ] || { echo "error: controller-gen wrote no CRD" >&2; exit 1; }

mkdir -p "$DEST"
rm -f "$DEST"/*.yaml
cp "$tmp"/out/*.yaml "$DEST/"
log "CRDs from $API@$api_version ... $n files in ${DEST#"$REPO"/}, done in $(( $(date +%s) - t0 ))s"
