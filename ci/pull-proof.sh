#!/usr/bin/env bash
# The pull path of the node image and of Chaos Mesh's images, proven on
# this machine without a registry on the network: a real OCI registry
# (cmd/registry) serves the offline 1.36 node image under the name
# gauntlet run pulls for Kubernetes 1.36 (kindest/node:v1.36.1), and the
# offline Chaos Mesh images under the release's names
# (chaos-mesh/chaos-mesh and chaos-mesh/chaos-daemon at v2.8.4). Each is
# configured as a user behind a mirror configures it: the Docker engine
# gets the registry as its Docker Hub mirror ("registry-mirrors" in
# /etc/docker/daemon.json, reloaded with SIGHUP), and gauntlet run gets it
# as Chaos Mesh's registry (--chaos-mesh-registry, Helm's images.registry).
# The served images then leave the engine, layers and all, and gauntlet
# run --kubernetes-version 1.36 must pull all three whole, make its kind
# cluster with kind's upstream config, and pass one chaos scenario. At
# exit the engine's configuration is restored and the served images
# tagged again (from the pull, or from the registry).
#
#   ci/pull-proof.sh [report dir]     (make test-pull-proof)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/lib.sh
source ci/lib.sh

out=${1:-artifacts/pull-proof}
port=${REGISTRY_PORT:-5002}
reg=127.0.0.1:$port
# What the registry serves (an image built here), at which path, and the
# name gauntlet run pulls it by.
served=("${PROOF_SERVED[@]}")
paths=("${PROOF_PATHS[@]}")
pulled=(kindest/node:v1.36.1 "$reg/chaos-mesh/chaos-mesh:v2.8.4" "$reg/chaos-mesh/chaos-daemon:v2.8.4")
start=$(date +%s)
log() { echo ">> $(date +%H:%M:%S) pull-proof: $*"; }

rm -rf "$out" && mkdir -p "$out"
for s in "${served[@]}"; do
	docker image inspect "$s" >/dev/null || { echo "pull-proof: $s is missing: make node-image KUBERNETES_VERSION=1.36.3 chaos-images" >&2; exit 1; }
done

bin/registry --listen "$reg" --dir "$out/blobs" >"$out/registry.log" 2>&1 &
registry=$!
# Other names of the served images (another proof's pushes, say) would keep
# their layers in the engine: they go too, and come back at exit.
others=()
for s in "${served[@]}"; do
	for tag in $(docker image inspect -f '{{join .RepoTags " "}}' "$(docker image inspect -f '{{.Id}}' "$s")"); do
		[ "$tag" = "$s" ] || others+=("$tag=$s")
	done
done
conf=/etc/docker/daemon.json
cp "$conf" "$out/daemon.json.orig"
reload() { kill -HUP "$(pidof dockerd)"; sleep 2; }
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	# A reload leaves a key the file no longer has as it was: the mirrors
	# are emptied explicitly, then the file is put back as it was.
	if jq '."registry-mirrors" //= []' "$out/daemon.json.orig" >"$conf"; then reload || true; fi
	cp "$out/daemon.json.orig" "$conf" || true
	# The served images leave the engine for the pulls to be whole ones:
	# each is put back from what was pulled, or from the registry.
	local i o
	for i in "${!served[@]}"; do
		docker image inspect "${served[$i]}" >/dev/null 2>&1 && continue
		docker tag "${pulled[$i]}" "${served[$i]}" 2>/dev/null ||
			{ docker pull -q "$reg/${paths[$i]}" >/dev/null && docker tag "$reg/${paths[$i]}" "${served[$i]}"; } || true
	done
	for o in "${others[@]}"; do docker tag "${o#*=}" "${o%%=*}" 2>/dev/null || true; done
	kill "$registry" 2>/dev/null || true
	# No name of a served image may pass for kind's or Chaos Mesh's own later.
	for i in "${!served[@]}"; do docker rmi "$reg/${paths[$i]}" "${pulled[$i]}" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
wait_registry "$port" "$out/registry.log" pull-proof
log "registry serving on $reg"

t=$(date +%s)
for i in "${!served[@]}"; do
	docker tag "${served[$i]}" "$reg/${paths[$i]}"
	docker push -q "$reg/${paths[$i]}" >/dev/null
	log "the registry serves ${served[$i]} as ${paths[$i]}"
done
log "pushed in $(( $(date +%s) - t ))s"

jq --arg m "http://$reg" '."registry-mirrors" = [$m]' "$out/daemon.json.orig" >"$conf"
reload
mirrors=$(docker info --format '{{range .RegistryConfig.Mirrors}}{{.}} {{end}}')
[[ $mirrors == *"$reg"* ]] || { echo "pull-proof: the engine did not take the mirror (mirrors: '$mirrors')" >&2; exit 1; }
log "the Docker engine mirrors Docker Hub to $mirrors"
# No layer of them stays in the engine but those another image holds (the
# daemon's Debian rootfs, a build input): the rest comes through the registry.
for o in "${others[@]}"; do docker rmi "${o%%=*}" >/dev/null; done
for i in "${!served[@]}"; do
	docker rmi "${pulled[$i]}" "$reg/${paths[$i]}" "${served[$i]}" >/dev/null 2>&1 || true
	if docker image inspect "${served[$i]}" >/dev/null 2>&1; then echo "pull-proof: ${served[$i]} is still in the engine" >&2; exit 1; fi
done

t=$(date +%s)
rc=0
bin/gauntlet run --kubernetes-version 1.36 --chaos-mesh-registry "$reg" -f suites/chaos/scenarios \
	--scenario leader-pod-kill --seed 1 --report "$out/run" >"$out/run.log" 2>&1 || rc=$?
grep -E 'node image:|Chaos Mesh images:|created kind cluster|\| leader-pod-kill' "$out/run.log" | sed 's/^/    /' || true
log "gauntlet run exited $rc after $(( $(date +%s) - t ))s (its log: $out/run.log)"
for repo in kindest/node chaos-mesh/chaos-mesh chaos-mesh/chaos-daemon; do
	log "the registry served $repo's manifest $(grep -c "GET /v2/$repo/manifests/" "$out/registry.log" || true) time(s) and $(grep -c "GET /v2/$repo/blobs/" "$out/registry.log" || true) blobs"
done
grep -q "node image: pulled ${pulled[0]}" "$out/run.log" || { echo "pull-proof: gauntlet run did not pull ${pulled[0]}" >&2; rc=1; }
grep -q "Chaos Mesh images: pulled ${pulled[1]} and ${pulled[2]}" "$out/run.log" || { echo "pull-proof: gauntlet run did not pull Chaos Mesh's images" >&2; rc=1; }
log "done in $(( $(date +%s) - start ))s"
exit "$rc"
