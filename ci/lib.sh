# shellcheck shell=bash
# Shared by the ci/ proofs: sourced, not run. The script that sources it
# defines log <message>.

# step <what> <command...>: says what starts, runs it, and says how long it
# took; a failing command fails the step (the scripts run with set -e).
step() {
	local what=$1 t
	shift
	t=$(date +%s)
	log "$what"
	"$@"
	log "$what: done in $(($(date +%s) - t))s"
}

# logged <file> <command...>: runs the command with its output in file; on
# failure prints the file's last lines and where it is.
logged() {
	local file=$1
	shift
	"$@" >"$file" 2>&1 || {
		echo "failed: $* (its log: $file)" >&2
		tail -20 "$file" >&2
		return 1
	}
}

# wait_registry <port> <registry log> <who>: waits (10 s at most) until the
# registry on 127.0.0.1:<port> answers /v2/ with 200; otherwise prints the
# registry's log and fails.
wait_registry() {
	local port=$1 logfile=$2 who=$3 code=
	for _ in $(seq 1 50); do
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/" || true)
		[ "$code" = 200 ] && return 0
		sleep 0.2
	done
	echo "$who: the registry does not answer on :$port (last answer: ${code:-none})" >&2
	cat "$logfile" >&2
	return 1
}

# What the pull proofs' registry serves: images built here (PROOF_SERVED),
# each at the path of the upstream image gauntlet run pulls in its place
# (PROOF_PATHS): kind's node image for Kubernetes 1.36 and Chaos Mesh's
# release images.
# shellcheck disable=SC2034 # used by the scripts that source this file
PROOF_SERVED=(gauntlet.dev/kind-node:v1.36.3 gauntlet.dev/chaos-controller-manager:v0.9.1-47411975a8cb
	gauntlet.dev/chaos-daemon:v0.9.1-47411975a8cb)
# shellcheck disable=SC2034
PROOF_PATHS=(kindest/node:v1.36.1 chaos-mesh/chaos-mesh:v2.8.4 chaos-mesh/chaos-daemon:v2.8.4)
