#!/usr/bin/env bash
# The pull path, proven on this machine without a registry on the network:
# a real OCI registry (cmd/registry, go-containerregistry's) serves on the
# kind network's gateway; a kind cluster is created with its containerd
# mirroring gauntlet.dev and example.com to it, as a user configures a
# mirror; `gauntlet run --kubeconfig ... --push-to` pushes the run's images
# and runs one chaos scenario, whose pods pull every image through the
# mirror (none is loaded into the node). It ends by counting the pulls the
# registry served and listing what the node pulled.
#
#   ci/registry-proof.sh [report dir]     (make test-registry-proof)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/lib.sh
source ci/lib.sh

out=${1:-artifacts/registry-proof}
port=${REGISTRY_PORT:-5001}
node_image=${NODE_IMAGE:-gauntlet.dev/kind-node:v1.35.4}
cluster=gauntlet-registry-proof
start=$(date +%s)
log() { echo ">> $(date +%H:%M:%S) registry-proof: $*"; }

rm -rf "$out" && mkdir -p "$out"
docker network inspect kind >/dev/null 2>&1 || docker network create kind >/dev/null
gateway=
for g in $(docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}'); do
	[[ $g =~ ^[0-9.]+$ ]] && { gateway=$g; break; }
done
[ -n "$gateway" ] || { echo "registry-proof: the kind network has no IPv4 gateway" >&2; exit 1; }

bin/registry --listen "0.0.0.0:$port" --dir "$out/blobs" >"$out/registry.log" 2>&1 &
registry=$!
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	bin/node/kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
	kill "$registry" 2>/dev/null || true
}
trap cleanup EXIT
wait_registry "$port" "$out/registry.log" registry-proof
log "registry serving on 0.0.0.0:$port (the nodes reach it at $gateway:$port)"

# The single-node config, with containerd mirroring the images' registries
# to this one (containerd 1.6's CRI mirrors, which the v1.35 node runs).
cp cluster/kindconfig/single-node.yaml "$out/kind.yaml"
cat >>"$out/kind.yaml" <<YAML
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."gauntlet.dev"]
    endpoint = ["http://$gateway:$port"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."example.com"]
    endpoint = ["http://$gateway:$port"]
YAML
t=$(date +%s)
bin/node/kind create cluster --name "$cluster" --image "$node_image" --config "$out/kind.yaml" \
	--kubeconfig "$out/kubeconfig" --wait 3m >"$out/kind.log" 2>&1 || { cat "$out/kind.log" >&2; exit 1; }
log "kind cluster $cluster up in $(( $(date +%s) - t ))s, mirroring gauntlet.dev and example.com to $gateway:$port"

t=$(date +%s)
rc=0
bin/gauntlet run --kubeconfig "$out/kubeconfig" --push-to "127.0.0.1:$port" -f suites/chaos/scenarios \
	--scenario leader-pod-kill --seed 1 --report "$out/run" >"$out/run.log" 2>&1 || rc=$?
grep -E 'pushed |\| leader-pod-kill' "$out/run.log" | sed 's/^/    /' || true
log "gauntlet run exited $rc after $(( $(date +%s) - t ))s (its log: $out/run.log)"

# What the node pulled through the mirror: the repositories whose
# manifests the registry served, and the images the node now holds.
pulled=$(grep -o 'GET /v2/[^ ]*/manifests/' "$out/registry.log" | sed 's#GET /v2/##; s#/manifests/##' | sort -u | tr '\n' ' ' || true)
docker exec "$cluster-control-plane" crictl images 2>/dev/null | grep -E '^(gauntlet\.dev|example\.com)/' >"$out/node-images.txt" || true
log "manifests the registry served to the node's containerd: ${pulled:-none}"
log "images the node holds (none loaded by kind; the local-path ones come with the node image):"
sed 's/^/    /' "$out/node-images.txt"
log "done in $(( $(date +%s) - start ))s"
exit "$rc"
