#!/usr/bin/env bash
# Usage: ci/explore-bugs.sh OUT
#
# Runs `gauntlet explore` on envtest against each of the reference
# operator's bug variants (suites/bugs/*.patch), built from a patched copy
# of the tree (suites/bugs/scratch.sh), with no scenario written for the
# bug: a campaign from the view suite's status-conflicts-during-scale-up,
# seed EXPLORE_SEED (1), at most EXPLORE_BUDGET (8m) each, ended at its
# first finding. Writes OUT/<variant>/ (each campaign's report, findings
# and explore.md) and OUT.md, a table of what each campaign found and how
# long it took. Exits 0 whatever was found: the table is the result.
set -euo pipefail

out=${1:?usage: ci/explore-bugs.sh OUT}
command -v jq >/dev/null || { echo "ci/explore-bugs.sh: needs jq (apt-get install jq)" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
# A copy: a rebuild of bin/gauntlet while this runs must not change the
# campaigns half way.
gauntlet=$(mktemp -d)/gauntlet
cp "$root/bin/gauntlet" "$gauntlet"
trap 'rm -rf "$(dirname "$gauntlet")"' EXIT
seed=${EXPLORE_SEED:-1}
budget=${EXPLORE_BUDGET:-8m}
mkdir -p "$out"
table=$out.md
{
  echo "| variant | found | oracle | shrunk to | found after | runs |"
  echo "|---|---|---|---|---|---|"
} > "$table"

cd "$root"
for patch in suites/bugs/*.patch; do
  v=$(basename "$patch" .patch)
  start=$(date +%s)
  echo ">> $(date +%H:%M:%S) bug variant $v: explore (seed $seed, budget $budget)"
  scratch=$(suites/bugs/scratch.sh "$patch")
  report=$out/$v
  rc=0
  "$gauntlet" explore -f suites/view/scenarios --base status-conflicts-during-scale-up \
    --seed "$seed" --sequences 8 --budget "$budget" --max-findings 1 --skip-field spec.deletionPolicy \
    --report "$report" --set "OPERATOR_MODULE=$scratch/operator" > "$report.log" 2>&1 || rc=$?
  rm -rf "$scratch"
  if [[ $rc -ne 0 && $rc -ne 1 ]] || [[ ! -f $report/explore.json ]]; then
    echo "ci/explore-bugs.sh: gauntlet explore exited $rc for $v (log: $report.log)" >&2
    echo "| $v | error (exit $rc) | - | - | - | - |" >> "$table"
    continue
  fi
  # Fields split on |, which no field holds: a tab is whitespace to read,
  # and two tabs around an empty field would be one.
  row=$(jq -r '[.runs, (.findings // [] | length),
      (.findings[0].oracle // "-"),
      (if (.findings // [] | length) == 0 then "-" else ((.findings[0].shrunk // []) | join(", then ") | if . == "" then "no step: the resource as it is" else . end) end),
      (if (.findings // [] | length) > 0 then ((.findings[0].after / 1e9) | floor | tostring) + "s" else "-" end)]
      | map(tostring | gsub("[|]"; "/")) | join("|")' "$report/explore.json")
  IFS='|' read -r runs found oracle shrunk after <<<"$row"
  echo "| $v | $([[ $found -gt 0 ]] && echo yes || echo no) | $oracle | $shrunk | $after | $runs |" >> "$table"
  echo ">> $(date +%H:%M:%S) bug variant $v: $([[ $found -gt 0 ]] && echo "found ($oracle) after $after" || echo "nothing found") in $(( $(date +%s) - start ))s"
done
cat "$table"
