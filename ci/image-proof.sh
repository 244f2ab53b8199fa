#!/usr/bin/env bash
# Uses the gauntlet image (make gauntlet-image) as a user would, with no
# checkout inside it: it prints its version, validates a copy of the
# Memcached example taken out of the repository and mounted at /work,
# runs one of its view scenarios on the envtest inside the image (the
# manager built here as a static binary, as a user's CI would build it,
# the Operator file pointed at it instead of building), and renders a
# recorded run's report again into a mounted folder. Each step's time is
# printed.
#
#   ci/image-proof.sh gauntlet.dev/gauntlet:<tag>
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:?usage: ci/image-proof.sh IMAGE}
work=$(mktemp -d "${TMPDIR:-/tmp}/gauntlet-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
log() { echo ">> $(date +%H:%M:%S) image-proof: $*"; }
# shellcheck source=ci/lib.sh
source ci/lib.sh
# expect WANT CMD...: run CMD, show its output, fail unless it printed WANT.
expect() {
  local want=$1 out; shift
  out=$("$@" 2>&1) || { echo "$out" >&2; echo "error: $* failed" >&2; return 1; }
  echo "$out" | sed 's/^/   | /'
  [[ $out == *"$want"* ]] || { echo "error: $* printed no \"$want\"" >&2; return 1; }
}
user=$(id -u):$(id -g)

step "the image's version" expect "Kubernetes: " docker run --rm "$image" version
git archive HEAD suites/examples/memcached | tar -x -C "$work"
mv "$work/suites/examples/memcached" "$work/memcached"
step "validate a copy of the Memcached example mounted at /work" \
  expect "valid" docker run --rm -v "$work/memcached:/work:ro" "$image" validate -f /work/scenarios
step "the Memcached manager built static, outside the image" \
  env CGO_ENABLED=0 go build -C suites/examples/memcached -o "$work/memcached/bin/manager" ./cmd/manager
# The image has no Go: the Operator file runs the binary instead of building it.
sed -e '/^    build: /d' -e 's#\${GAUNTLET_PROCESS_BINARY}#/work/bin/manager#' \
  suites/examples/memcached/view-scenarios/operator.yaml >"$work/memcached/view-scenarios/operator.yaml"
chmod -R a+rwX "$work/memcached"
step "run a view scenario on the image's envtest" \
  expect "| kill-after-deployment-write | passed |" docker run --rm --user "$user" -v "$work/memcached:/work" "$image" \
  run --envtest -f /work/view-scenarios --scenario kill-after-deployment-write --seed 1 --report /work/report
mkdir -p "$work/run"
cp chaos/report/testdata/kind-seed-2026.json "$work/run/report.json"
chmod -R a+rwX "$work/run"
step "render a recorded run's report into a mounted folder" \
  expect "report.html" docker run --rm --user "$user" -v "$work/run:/work/run" "$image" report /work/run
[[ -s $work/run/report.html ]] || { echo "error: no report.html written" >&2; exit 1; }
log "the image ran with no checkout: $image"
