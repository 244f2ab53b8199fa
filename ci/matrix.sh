#!/usr/bin/env bash
# Usage: ci/matrix.sh [VERSION ...]
#
# Runs here what the GitHub Actions matrix runs (.github/workflows/ci.yml), with the
# same script (ci/tier.sh): the integration tier, the e2e smoke and one chaos scenario
# on each Kubernetes minor (default: the three the workflow names), one after another,
# then prints one table, minor x tier: pass or fail, and how long it took. Each tier's
# output goes to artifacts/matrix/<version>-<tier>.log. Exits 1 when a row failed.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t versions < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else
  sed -n 's/^ *kubernetes: \[\(.*\)\]/\1/p' .github/workflows/ci.yml | tr -d ' ' | tr ',' '\n'; fi)
[ ${#versions[@]} -gt 0 ] || { echo "ci/matrix.sh: no Kubernetes version in .github/workflows/ci.yml" >&2; exit 2; }
tiers=(integration e2e-smoke chaos-one)
mkdir -p artifacts/matrix
table=artifacts/matrix.md
{
  echo "| Kubernetes | $(printf '%s | ' "${tiers[@]}")"
  echo "|---|$(printf -- '---|%.0s' "${tiers[@]}")"
} > "$table"
failed=0
start=$(date +%s)
for v in "${versions[@]}"; do
  row="| $v |"
  for tier in "${tiers[@]}"; do
    log=artifacts/matrix/$v-$tier.log
    t=$(date +%s)
    echo ">> $(date +%H:%M:%S) matrix: $tier on Kubernetes $v (log: $log)"
    if KUBERNETES_VERSION=$v ci/tier.sh "$tier" >"$log" 2>&1; then
      verdict=pass
    else
      verdict=FAIL failed=1
      tail -5 "$log" | sed 's/^/   | /'
    fi
    took=$(( $(date +%s) - t ))
    echo ">> $(date +%H:%M:%S) matrix: $tier on Kubernetes $v: $verdict in ${took}s"
    row+=" $verdict, $(( took / 60 ))m$(printf '%02d' $(( took % 60 )))s |"
  done
  echo "$row" >> "$table"
done
echo ">> $(date +%H:%M:%S) matrix done in $(( $(date +%s) - start ))s"
cat "$table"
exit "$failed"
