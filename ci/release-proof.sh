#!/usr/bin/env bash
# Rehearses a release: GoReleaser builds the archives a v* tag would publish
# (.goreleaser.yaml, --snapshot: no tag, nothing published) into dist/, then
# the archive for this machine is unpacked in an empty folder, away from the
# checkout, and its binary used there as a user would: its version, its
# schemas, init and validate in a copy of the Memcached example.
#
#   ci/release-proof.sh <goreleaser binary>
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { echo ">> $(date +%H:%M:%S) release-proof: $*"; }
# shellcheck source=ci/lib.sh
source ci/lib.sh

goreleaser=$1
work=$(mktemp -d /tmp/release-proof-XXXX)
trap 'rm -rf "$work"' EXIT

step "GoReleaser's snapshot archives into dist/" "$goreleaser" release --snapshot --clean
os=$(go env GOOS) arch=$(go env GOARCH)
archive=$(ls dist/gauntlet_*_"${os}_${arch}".tar.gz)
log "$(du -h "$archive" | cut -f1) $archive; sha256 listed in dist/checksums.txt: $(grep -c . dist/checksums.txt) archives"
grep -q "$(basename "$archive")" dist/checksums.txt

mkdir -p "$work/bin"
tar -xzf "$archive" -C "$work/bin"
cp -r suites/examples/memcached "$work/user"
rm -rf "$work/user/bin"
cd "$work/user"
g=$work/bin/gauntlet
step "gauntlet version, from the archive" "$g" version
# GoReleaser reads the commit from git, and gives up on it ("none") in a
# repository with no remote (a snapshot ignores git errors).
if [ -n "$(git -C "$root" remote)" ]; then
	v=$("$g" version)
	grep -q "^commit: $(git -C "$root" rev-parse HEAD)" <<<"$v" ||
		{ echo "release-proof: the archive's binary does not name HEAD's commit" >&2; exit 1; }
fi
schema=$("$g" schema scenario)
grep -q '"$id"' <<<"$schema"
log "gauntlet schema scenario, from the archive: $(wc -c <<<"$schema") bytes"
step "gauntlet init in a copy of the Memcached example" "$g" init --sample scenarios/memcached.yaml --out gauntlet
step "gauntlet validate of what init wrote" "$g" validate -f gauntlet --set MEMCACHED_IMAGE=example.com/memcached:bookworm
step "gauntlet validate of the example's own scenarios" "$g" validate -f scenarios
log "the archive's binary works outside the repository"
