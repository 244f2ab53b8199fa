#!/usr/bin/env bash
# Builds the reference operator's image from a source tree (a bug
# variant's patched copy, or this checkout), as gauntlet bench bugs --kind
# asks of a bench's images command:
#
#   OPERATOR_SOURCE=<tree> GAUNTLET_IMAGES_ENV=<file> ./images.sh
#
# The manager and the backup program are built from the tree with the
# local Go (the build cache makes a patched copy incremental), the image
# FROM scratch by the checkout's tools/images/build.sh, tagged by the
# binaries' hash. It never touches gauntlet.dev/operator:dev, the name the
# checkout's own files run. It writes OPERATOR_IMAGE=<name> to
# GAUNTLET_IMAGES_ENV (default bin/images.env here).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${OPERATOR_SOURCE:?set OPERATOR_SOURCE to a source tree of the reference operator}"
src=$(cd "$OPERATOR_SOURCE" && pwd)
env_file=${GAUNTLET_IMAGES_ENV:-$here/bin/images.env}
mkdir -p "$(dirname "$env_file")"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
start=$SECONDS
echo ">> building the manager and the backup program from $src"
(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$bin/manager" ./operator/cmd &&
  CGO_ENABLED=0 go build -trimpath -o "$bin/backup" ./operator/cmd/backup)
echo ">> built in $((SECONDS - start))s"
tag=tree-$(cat "$bin/manager" "$bin/backup" | sha256sum | cut -c1-12)
if docker image inspect "gauntlet.dev/operator:$tag" > /dev/null 2>&1; then
  echo ">> gauntlet.dev/operator:$tag is present: reused"
else
  MANAGER_BIN=$bin/manager BACKUP_BIN=$bin/backup "$root/tools/images/build.sh" operator "$tag"
fi
echo "OPERATOR_IMAGE=gauntlet.dev/operator:$tag" > "$env_file"
echo ">> OPERATOR_IMAGE=gauntlet.dev/operator:$tag ($((SECONDS - start))s)"
