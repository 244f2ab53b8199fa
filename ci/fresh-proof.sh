#!/usr/bin/env bash
# Time to the first verdict on a fresh machine, measured on this one: HEAD
# is cloned anew, a Docker engine with an empty data root takes the place
# of the running one, and Go's build and module caches start empty. Then a
# new user's steps run: make gauntlet, and gauntlet run of one chaos
# scenario, which builds or pulls every image it needs. Each step's time
# is printed, and the time from the clone to the scenario's verdict. A
# second gauntlet run follows on the now warm engine and caches: every
# image is reused, and each image's own checks run again.
#
#   ci/fresh-proof.sh offline [report dir]   the air-gapped path: --offline,
#                                            every image built here
#   ci/fresh-proof.sh pull [report dir]      the pull path: a registry on this
#       machine (cmd/registry, built by make registry in this checkout)
#       serves kind's node image for 1.36 and Chaos Mesh's release images
#       under their upstream names; the fresh engine mirrors Docker Hub to
#       it (--registry-mirror) and gauntlet run is given it as Chaos Mesh's
#       registry (--chaos-mesh-registry), as a user behind a mirror would
#   ci/fresh-proof.sh install [report dir]   a user's door, on the pull path's
#       engine and registry: no clone and no make. The README's install
#       line (go install .../cmd/gauntlet@v0.1.0, HEAD's modules served by
#       ci/modproxy where proxy.golang.org would serve a tag) in an empty
#       folder; the Memcached example copied out of the repository as the
#       user's project, its images built by its own images.sh; then
#       gauntlet init and gauntlet run of the pod kill init wrote
#
# Root only. It stops the running Docker engine (no container may run) and
# starts it again at exit. The work folder (engine data, caches, clone;
# about 15 GB offline) is /var/tmp/gauntlet-fresh, removed at exit unless
# KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=ci/lib.sh
source ci/lib.sh

mode=${1:-}
case $mode in offline|pull|install) ;; *) sed -n '10,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2;; esac
out=$(realpath -m "${2:-artifacts/fresh-proof-$mode}")
work=/var/tmp/gauntlet-fresh
port=${REGISTRY_PORT:-5002}
start=$(date +%s)
log() { echo ">> $(date +%H:%M:%S) fresh-proof: $*"; }
since() { echo "$(( $(date +%s) - $1 ))s"; }

[ "$(id -u)" = 0 ] || { echo "fresh-proof: run as root (it swaps the Docker engine)" >&2; exit 1; }
if [ -n "$(docker ps -q 2>/dev/null)" ]; then
	echo "fresh-proof: containers are running (docker ps); stop them first" >&2
	exit 1
fi
if [ "$mode" != offline ]; then
	[ -x bin/registry ] || { echo "fresh-proof: bin/registry is missing: make registry" >&2; exit 1; }
	for img in "${PROOF_SERVED[@]}"; do
		docker image inspect "$img" >/dev/null || { echo "fresh-proof: $img is missing (make node-image KUBERNETES_VERSION=1.36.3 chaos-images)" >&2; exit 1; }
	done
fi
rm -rf "$out" "$work" && mkdir -p "$out" "$work"

registry=
fresh=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [ -n "$fresh" ]; then
		docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1 || true
		kill "$fresh" 2>/dev/null || true
		for _ in $(seq 1 60); do kill -0 "$fresh" 2>/dev/null || break; sleep 1; done
	fi
	[ -z "$registry" ] || kill "$registry" 2>/dev/null || true
	"$root/ci/docker-engine.sh" >/dev/null || echo "fresh-proof: the Docker engine did not start again: ci/docker-engine.sh" >&2
	[ "${KEEP:-}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# The pull path's registry, filled from the running engine before it stops:
# what a registry on the network would serve under these names.
mirror=()
if [ "$mode" != offline ]; then
	bin/registry --listen "127.0.0.1:$port" --dir "$work/registry" >"$out/registry.log" 2>&1 &
	registry=$!
	wait_registry "$port" "$out/registry.log" fresh-proof
	t=$(date +%s)
	for i in "${!PROOF_SERVED[@]}"; do
		docker tag "${PROOF_SERVED[$i]}" "127.0.0.1:$port/${PROOF_PATHS[$i]}"
		docker push -q "127.0.0.1:$port/${PROOF_PATHS[$i]}" >/dev/null
		docker rmi "127.0.0.1:$port/${PROOF_PATHS[$i]}" >/dev/null
	done
	log "the registry on 127.0.0.1:$port serves ${PROOF_PATHS[*]} ($(since "$t") to push)"
	mirror=(--registry-mirror "http://127.0.0.1:$port")
fi

t=$(date +%s)
if pid=$(pidof dockerd); then
	kill "$pid"
	for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
	! kill -0 "$pid" 2>/dev/null || { echo "fresh-proof: dockerd ($pid) did not stop" >&2; exit 1; }
fi
dockerd --data-root "$work/docker" --exec-root "$work/exec" --pidfile "$work/dockerd.pid" "${mirror[@]}" \
	>"$out/dockerd.log" 2>&1 &
fresh=$!
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { echo "fresh-proof: the empty engine did not answer" >&2; tail -20 "$out/dockerd.log" >&2; exit 1; }
log "an empty Docker engine answers ($(docker images -q | wc -l) images; data root $work/docker) after $(since "$t")"

# The install path's module proxy, written while Go's caches are warm: what
# proxy.golang.org would serve once the version is tagged. Not the user's
# time.
version=${VERSION:-v0.1.0}
if [ "$mode" = install ]; then
	t=$(date +%s)
	mkdir -p "$work/tree"
	git archive HEAD | tar -x -C "$work/tree"
	go run ./ci/modproxy -src "$work/tree" -version "$version" -out "$work/proxy" >"$out/modproxy.log" 2>&1 ||
		{ tail -20 "$out/modproxy.log" >&2; exit 1; }
	log "HEAD's modules served at $version by a proxy folder ($(since "$t"))"
fi

# timed <what> <log name> <command...>: a step with its output in the
# report folder.
timed() {
	local what=$1 name=$2
	shift 2
	step "$what" logged "$out/$name.log" "$@"
}

export GOCACHE=$work/go-build GOMODCACHE=$work/go-mod GOPATH=$work/go
t0=$(date +%s)
if [ "$mode" = install ]; then
	proxy=$(go env GOPROXY)
	export GOWORK=off GOFLAGS='' GONOSUMDB=github.com/gauntlet-dev GOPROXY="file://$work/proxy,$proxy"
	mkdir -p "$work/empty"
	cp -r suites/examples/memcached "$work/user"
	rm -rf "$work/user/bin"
	log "Go's caches are empty ($GOCACHE, $GOMODCACHE); the user's project is a copy of the Memcached example in $work/user"
	cd "$work/empty"
	timed "go install github.com/gauntlet-dev/gauntlet/cmd/gauntlet@$version in an empty folder" install \
		env GOBIN="$work/bin" go install "github.com/gauntlet-dev/gauntlet/cmd/gauntlet@$version"
	g=$work/bin/gauntlet
	log "$("$g" version | head -1)"
	cd "$work/user"
	# Out of the workspace the copy's go.sum needs the framework module's
	# sums, as after any go get of a new version.
	timed "go mod tidy in the user's project" tidy go mod tidy
	timed "the user's images (its own images.sh)" images ./images.sh
	timed "gauntlet init" init "$g" init --sample scenarios/memcached.yaml --out gauntlet
	scenario=pod-kill
	args=(-f gauntlet --scenario "$scenario" --seed 1 --set "MEMCACHED_CONTROLLER_MANAGER_IMAGE=$(sed -n 's/^MEMCACHED_OPERATOR_IMAGE=//p' bin/images.env)"
		--set "MEMCACHED_IMAGE=$(sed -n 's/^MEMCACHED_IMAGE=//p' bin/images.env)")
else
	git clone -q --no-local . "$work/src"
	log "cloned $(git rev-parse --short HEAD) in $(since "$t0"); Go's caches are empty ($GOCACHE, $GOMODCACHE)"
	cd "$work/src"
	timed "make gauntlet" make-gauntlet make --no-print-directory gauntlet
	g=bin/gauntlet
	scenario=leader-pod-kill
	args=(-f suites/chaos/scenarios --scenario "$scenario" --seed 1)
fi
if [ "$mode" = offline ]; then
	args+=(--offline)
else
	args+=(--kubernetes-version 1.36 --chaos-mesh-registry "127.0.0.1:$port")
fi
# run <name>: gauntlet run, each line stamped with the seconds since the
# user's first step (the clone, or the install).
run() {
	local rc=0 t
	t=$(date +%s)
	"$g" run "${args[@]}" --report "$out/$1" 2>&1 | while IFS= read -r line; do
		printf '%5ds %s\n' "$(( $(date +%s) - t0 ))" "$line"
	done >"$out/$1.log" || rc=$?
	log "gauntlet run ($1) exited $rc after $(since "$t")"
	grep -E 'node image:|Chaos Mesh images?:|done in|reusing|checked|pulled|\| '"$scenario " "$out/$1.log" | sed 's/^/    /' >"$out/$1.summary" || true
	return "$rc"
}
rc=0
run first || rc=$?
verdict=$(grep -m1 "| $scenario |" "$out/first.log" || true)
[ -n "$verdict" ] || { echo "fresh-proof: the first run printed no verdict (its log: $out/first.log)" >&2; exit 1; }
log "first verdict $(awk '{print $1}' <<<"$verdict") after the user's first step: $(sed 's/^ *[0-9]*s //' <<<"$verdict")"
log "where the time went (the first run's steps):"
grep -E 'done in|finished in|pulled|built' "$out/first.log" | sed 's/^/    /' | head -60
run second || rc=$?
log "the second run on the warm engine and caches: $(grep -c 'reusing' "$out/second.log" || true) images reused, $(grep -c 'checked' "$out/second.log" || true) checks run"
log "the work folder holds $(du -sh "$work" | cut -f1); done in $(since "$start")"
exit "$rc"
