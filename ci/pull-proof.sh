#!/usr/bin/env bash
# The node image's pull path, proven on this machine without a registry on
# the network: a real OCI registry (cmd/registry) serves the offline 1.36
# node image under the name gauntlet run pulls for Kubernetes 1.36
# (kindest/node:v1.36.1), and the Docker engine is given it as its Docker
# Hub mirror ("registry-mirrors" in /etc/docker/daemon.json, reloaded with
# SIGHUP), as a user behind a mirror configures it. The served image then
# leaves the engine, layers and all, and gauntlet run --kubernetes-version
# 1.36 must pull the node image whole through the mirror, make its kind
# cluster from it with kind's upstream config, and pass one chaos
# scenario. At exit the engine's configuration is restored and the served
# image tagged again (from the pull, or from the registry).
#
#   ci/pull-proof.sh [report dir]     (make test-pull-proof)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=ci/lib.sh
source ci/lib.sh

out=${1:-artifacts/pull-proof}
port=${REGISTRY_PORT:-5002}
served=gauntlet.dev/kind-node:v1.36.3   # what the mirror serves ...
upstream=kindest/node:v1.36.1           # ... under the name gauntlet run pulls for 1.36
start=$(date +%s)
log() { echo ">> $(date +%H:%M:%S) pull-proof: $*"; }

rm -rf "$out" && mkdir -p "$out"
docker image inspect "$served" >/dev/null || { echo "pull-proof: $served is missing: make node-image KUBERNETES_VERSION=1.36.3" >&2; exit 1; }

bin/registry --listen "127.0.0.1:$port" --dir "$out/blobs" >"$out/registry.log" 2>&1 &
registry=$!
conf=/etc/docker/daemon.json
cp "$conf" "$out/daemon.json.orig"
reload() { kill -HUP "$(pidof dockerd)"; sleep 2; }
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	# A reload leaves a key the file no longer has as it was: the mirrors
	# are emptied explicitly, then the file is put back as it was.
	if jq '."registry-mirrors" //= []' "$out/daemon.json.orig" >"$conf"; then reload || true; fi
	cp "$out/daemon.json.orig" "$conf" || true
	# The served image leaves the engine for the pull to be a whole one:
	# it is put back from what was pulled, or from the registry.
	if ! docker image inspect "$served" >/dev/null 2>&1; then
		docker tag "$upstream" "$served" 2>/dev/null ||
			{ docker pull -q "127.0.0.1:$port/$upstream" >/dev/null && docker tag "127.0.0.1:$port/$upstream" "$served"; } || true
	fi
	kill "$registry" 2>/dev/null || true
	# Neither name of the served image may pass for kind's own later.
	docker rmi "127.0.0.1:$port/$upstream" "$upstream" >/dev/null 2>&1 || true
}
trap cleanup EXIT
wait_registry "$port" "$out/registry.log" pull-proof
log "registry serving on 127.0.0.1:$port"

t=$(date +%s)
docker tag "$served" "127.0.0.1:$port/$upstream"
docker push -q "127.0.0.1:$port/$upstream" >/dev/null
log "the registry serves $served as $upstream ($(( $(date +%s) - t ))s to push)"

jq --arg m "http://127.0.0.1:$port" '."registry-mirrors" = [$m]' "$out/daemon.json.orig" >"$conf"
reload
mirrors=$(docker info --format '{{range .RegistryConfig.Mirrors}}{{.}} {{end}}')
[[ $mirrors == *"127.0.0.1:$port"* ]] || { echo "pull-proof: the engine did not take the mirror (mirrors: '$mirrors')" >&2; exit 1; }
log "the Docker engine mirrors Docker Hub to $mirrors"
# No layer of it stays in the engine, so every one comes through the mirror.
docker rmi "$upstream" "127.0.0.1:$port/$upstream" "$served" >/dev/null 2>&1 || true
if docker image inspect "$served" >/dev/null 2>&1; then echo "pull-proof: $served is still in the engine" >&2; exit 1; fi

t=$(date +%s)
rc=0
bin/gauntlet run --kubernetes-version 1.36 -f suites/chaos/scenarios --scenario leader-pod-kill --seed 1 \
	--report "$out/run" >"$out/run.log" 2>&1 || rc=$?
grep -E 'node image:|created kind cluster|\| leader-pod-kill' "$out/run.log" | sed 's/^/    /' || true
log "gauntlet run exited $rc after $(( $(date +%s) - t ))s (its log: $out/run.log)"
pulls=$(grep -c "GET /v2/kindest/node/manifests/" "$out/registry.log" || true)
blobs=$(grep -c "GET /v2/kindest/node/blobs/" "$out/registry.log" || true)
log "the registry served kindest/node's manifest $pulls time(s) and $blobs blobs"
grep -q "node image: pulled $upstream" "$out/run.log" || { echo "pull-proof: gauntlet run did not pull $upstream" >&2; rc=1; }
log "done in $(( $(date +%s) - start ))s"
exit "$rc"
