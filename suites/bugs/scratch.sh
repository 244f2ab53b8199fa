#!/usr/bin/env bash
# Usage: suites/bugs/scratch.sh [PATCH]
#
# Copies the working tree (tracked files and untracked ones git does not
# ignore, so not bin/ or artifacts/) into a new temporary directory, applies
# PATCH there when given (a bug variant, suites/bugs/<variant>.patch), and
# prints the directory. The tree itself is never patched; the caller removes
# the copy. The build cache makes compiling the copy incremental.
set -euo pipefail

[[ $# -eq 0 || -f $1 ]] || { echo "scratch.sh: no such patch: $1" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
patch=${1:+$(realpath "$1")}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gauntlet-bug.XXXXXX")
trap 'rm -rf "$dir"' ERR

# A tracked file deleted in the tree is left out rather than failing the copy.
git -C "$root" ls-files -z --cached --others --exclude-standard |
  tar -C "$root" --null -T - --ignore-failed-read --warning=no-failed-read -c |
  tar -x -C "$dir"
# The copy is a tree of its own: inside an enclosing repository (TMPDIR in
# a checkout), git apply would skip every path outside the current directory
# in silence. Apply and reverse-apply in it with the same setting.
if [[ -n $patch ]]; then
  GIT_CEILING_DIRECTORIES=$(dirname "$dir") git -C "$dir" apply "$patch"
fi
echo "$dir"
