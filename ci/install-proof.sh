#!/usr/bin/env bash
# Installs gauntlet as a user would, in an empty folder, before any tag
# is pushed: HEAD's modules are served at VERSION (below) by a
# local module proxy (ci/modproxy, a folder GOPROXY=file:// reads; every
# other module comes from the usual proxy), then
#   go install github.com/gauntlet-dev/gauntlet/cmd/gauntlet@VERSION
# runs with no checkout, no go.work and no make. The installed binary
# then prints its version and, in a copy of the Memcached example taken
# out of the repository, writes its starter files (gauntlet init) and
# validates them and the example's own scenarios: no repository path is
# read. Last, an adopter's empty module requires the library modules
# (framework, cluster, chaos) at VERSION and runs their own tests from the
# module cache: each reads only its own testdata. Each step's time is
# printed.
#
# VERSION defaults to a pseudo-version of HEAD (v0.1.1-0.<commit time>-<sha>):
# a module cache keeps a version once downloaded, so a version served
# before with other contents would be taken in place of HEAD's. COLD=1
# starts from empty Go build and module caches, as a fresh machine does.
# KUBEBUILDER_ASSETS names envtest's binaries for the libraries' tests.
# The work folder is removed at exit unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=${VERSION:-v0.1.1-0.$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)-$(git rev-parse --short=12 HEAD)}
work=$(mktemp -d "${TMPDIR:-/tmp}/gauntlet-install.XXXXXX")
[[ ${KEEP:-} == 1 ]] || trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
log() { echo ">> $(date +%H:%M:%S) install-proof: $*"; }
# shellcheck source=ci/lib.sh
source ci/lib.sh

mkdir -p "$work/src" "$work/empty" "$work/bin" "$work/adopter"
step "HEAD's tree" sh -c "git archive HEAD | tar -x -C '$work/src'"
step "the modules at $version in a local proxy" go run ./ci/modproxy -src "$work/src" -version "$version" -out "$work/proxy"
if [[ ${COLD:-} == 1 ]]; then
  export GOCACHE=$work/gocache GOMODCACHE=$work/modcache
fi
proxy=$(go env GOPROXY)
export GOWORK=off GOFLAGS='' GOPROXY="file://$work/proxy,$proxy" GONOSUMDB=github.com/gauntlet-dev
cd "$work/empty"
step "go install .../cmd/gauntlet@$version in an empty folder" \
  env GOBIN="$work/bin" go install "github.com/gauntlet-dev/gauntlet/cmd/gauntlet@$version"
g=$work/bin/gauntlet
"$g" version
cp -r "$root/suites/examples/memcached" "$work/user"
cd "$work/user"
rm -rf bin
step "gauntlet init in the example, out of the repository" "$g" init --sample scenarios/memcached.yaml --out gauntlet
step "gauntlet validate of what init wrote" "$g" validate -f gauntlet --set MEMCACHED_IMAGE=example.com/memcached:bookworm
step "gauntlet validate of the example's own scenarios" "$g" validate -f scenarios
libs=(github.com/gauntlet-dev/gauntlet/{framework,cluster,chaos}/...)
cd "$work/adopter"
go mod init example.com/adopter >/dev/null 2>&1
step "an adopter's module requires the libraries at $version" go get -t "${libs[@]/%/@$version}"
step "the libraries' own tests, from the module cache" go test "${libs[@]}"
log "installed and used outside the repository"
