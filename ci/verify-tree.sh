#!/usr/bin/env bash
# Fails when git tracks build output: a compiled executable (ELF, Mach-O, PE)
# or any file over 1 MiB that is not on the allow-list of generated manifests
# and recorded fixtures below. Run by `make verify` (part of `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
# Large files that belong in git: generated CRDs and recorded fixtures.
allowed=(
  'chaos/install/crds/*.yaml'
)

is_allowed() {
  local f=$1 p
  for p in "${allowed[@]}"; do
    # shellcheck disable=SC2053 # p is a glob on purpose
    [[ $f == $p ]] && return 0
  done
  return 1
}

bad=0
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue # deleted in the work tree, not yet staged
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a*)
      echo "tracked executable: $f (build output does not belong in git; add its path to .gitignore)" >&2
      bad=1
      continue
      ;;
  esac
  size=$(stat -c %s -- "$f")
  if ((size > limit)) && ! is_allowed "$f"; then
    echo "tracked file over 1 MiB: $f ($size bytes); build output does not belong in git, and a real fixture goes on the allow-list in $0" >&2
    bad=1
  fi
done < <(git ls-files -z)

if ((bad)); then exit 1; fi
echo "tree: no executables, no unexpected file over 1 MiB ($(git ls-files | wc -l) files tracked)"
