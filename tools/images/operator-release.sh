#!/usr/bin/env bash
# Builds the operator as an earlier commit had it, for the operator upgrade
# test: its source from git (no network), its manager binary, its image
# (gauntlet.dev/operator:release-<commit>) and its kustomization, all under
# bin/releases/<commit>/ and reused when present.
#
#   tools/images/operator-release.sh <commit>
#
# Prints, last, two lines for bin/images-release.env:
#   OPERATOR_RELEASE_IMAGE=gauntlet.dev/operator:release-<commit>
#   OPERATOR_RELEASE_MANIFESTS=<dir of its config/default>
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
[ $# -eq 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
ref=$(git -C "$ROOT" rev-parse --short=12 "$1^{commit}")
dir="$ROOT/bin/releases/$ref"
log() { printf '%s operator-release: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ ! -d "$dir/src" ]; then
	log "extracting $ref from git"
	mkdir -p "$dir.tmp"
	git -C "$ROOT" archive "$ref" | tar -x -C "$dir.tmp"
	mkdir -p "$dir"
	mv "$dir.tmp" "$dir/src"
fi
if [ ! -x "$dir/manager" ]; then
	log "building the manager of $ref ..."
	start=$SECONDS
	(cd "$dir/src" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$dir/manager" ./operator/cmd)
	log "building the manager of $ref ... done in $((SECONDS - start))s"
fi
# The release had no backup program; the image is built the same way with
# today's, which the release never runs.
[ -x "$ROOT/bin/backup" ] || { echo "error: bin/backup is missing: run make manager" >&2; exit 1; }
MANAGER_BIN="$dir/manager" BACKUP_BIN="$ROOT/bin/backup" "$SCRIPT_DIR/build.sh" operator "release-$ref" >&2
echo "OPERATOR_RELEASE_IMAGE=${IMAGE_REPO:-gauntlet.dev}/operator:release-$ref"
echo "OPERATOR_RELEASE_MANIFESTS=$dir/src/operator/config/default"
