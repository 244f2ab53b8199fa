#!/usr/bin/env bash
# Usage: ci/view-bugs.sh OUT
#
# Runs the view-fault scenario files against each bug variant, built from a
# patched copy of the tree (suites/bugs/scratch.sh), with no Go test code:
# the reference operator's variants (suites/bugs/*.patch) against
# suites/view/scenarios, the Memcached example's (its bugs/*.patch) against
# its view-scenarios. Writes OUT/<variant>/ (each run's report) and
# OUT.md, a table of which scenarios caught each variant and how long the
# run took. Exits 0 whatever was caught: the table is the result.
set -euo pipefail

out=${1:?usage: ci/view-bugs.sh OUT}
command -v jq >/dev/null || { echo "ci/view-bugs.sh: needs jq (apt-get install jq)" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
gauntlet=$root/bin/gauntlet
mkdir -p "$out"
table=$out.md
{
  echo "| variant | caught by | not caught by | run |"
  echo "|---|---|---|---|"
} > "$table"

run_variant() {
  local patch=$1 dir=$2 module_var=$3 module_rel=$4
  local v scratch start rc report caught missed
  v=$(basename "$patch" .patch)
  [[ $patch == suites/examples/* ]] && v=memcached-$v
  start=$(date +%s)
  echo ">> bug variant $v ($patch) against $dir"
  scratch=$(suites/bugs/scratch.sh "$patch")
  report=$out/$v
  rc=0
  "$gauntlet" run --envtest -f "$dir" --seed 1 --report "$report" \
    --set "$module_var=$scratch/$module_rel" || rc=$?
  rm -rf "$scratch"
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    echo "ci/view-bugs.sh: gauntlet run exited $rc for $v" >&2
  fi
  caught=$(jq -r '[.results[] | select((.errors // []) + (.violations // []) | length > 0) | .scenario] | join(", ")' "$report/report.json")
  missed=$(jq -r '[.results[] | select(((.errors // []) + (.violations // []) | length == 0) and .skipped == null) | .scenario] | join(", ")' "$report/report.json")
  echo "| $v | ${caught:--} | ${missed:--} | $(( $(date +%s) - start ))s |" >> "$table"
  echo ">> bug variant $v: caught by [${caught}] in $(( $(date +%s) - start ))s"
}

cd "$root"
for p in suites/bugs/*.patch; do
  run_variant "$p" suites/view/scenarios OPERATOR_MODULE operator
done
for p in suites/examples/memcached/bugs/*.patch; do
  run_variant "$p" suites/examples/memcached/view-scenarios MEMCACHED_MODULE suites/examples/memcached
done
cat "$table"
