#!/usr/bin/env bash
# Runs `go mod tidy` in every module of go.work. The modules require one
# another by version (as an adopter does) and go.work builds them from this
# tree; tidy ignores go.work, so each run gets temporary replace directives
# to the sibling folders, removed again afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

# The version the modules of this repository require one another at; they
# are released together under it.
version=v0.1.0

mapfile -t mods < <(go work edit -json | jq -r '.Use[].DiskPath')
for dir in "${mods[@]}"; do
  dir=${dir#./}
  [[ $dir == . || -z $dir ]] && dir=.
  (
    cd "$dir"
    self=$(go mod edit -json | jq -r .Module.Path)
    reps=()
    for other in "${mods[@]}"; do
      other=${other#./}; [[ -z $other ]] && other=.
      path=$(cd "$OLDPWD/$other" && go mod edit -json | jq -r .Module.Path)
      [[ $path == "$self" ]] && continue
      rel=$(realpath --relative-to=. "$OLDPWD/$other")
      [[ $rel == .* ]] || rel=./$rel
      reps+=("$path")
      go mod edit -replace="$path=$rel"
      # Require it when this module imports it, so tidy keeps the version.
      if grep -rqsF --include='*.go' -e "\"$path/" -e "\"$path\"" . 2>/dev/null; then
        go mod edit -require="$path@$version"
      fi
    done
    echo ">> tidy $dir"
    GOWORK=off GOFLAGS=-mod=mod go mod tidy
    for p in "${reps[@]}"; do go mod edit -dropreplace="$p"; done
  )
done
