#!/usr/bin/env bash
# Builds pinned test binaries from Go modules, offline except for the Go module proxy.
#
#   tools/bins/build.sh etcd <etcd-version>                     -> bin/etcd/<v>/{etcd,etcdctl,etcdutl}
#   tools/bins/build.sh kube-apiserver <k8s-version>            -> bin/k8s/<v>/kube-apiserver
#   tools/bins/build.sh kubectl <k8s-version>                   -> bin/k8s/<v>/kubectl
#   tools/bins/build.sh envtest <k8s-version> <etcd-version>    -> bin/k8s/<v>/{kube-apiserver,etcd,kubectl}
#                                                                  (a KUBEBUILDER_ASSETS directory)
#   tools/bins/build.sh versitygw <version>                     -> bin/versitygw/<v>/versitygw
#                                                                  (an S3-compatible server, posix backend)
#
# Each version is built from its own wrapper module, tools/bins/<family>/<version>/ (go.mod and
# go.sum are committed, builds use -mod=readonly). For a version without a wrapper module the
# script creates one (needs the module proxy; commit the new directory afterwards).
# Idempotent: binaries that exist and report the expected version are reused.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
BIN="$ROOT/bin"

# A go.work at the repo root must not capture the wrapper modules.
export GOWORK=off
export CGO_ENABLED=0
# GOFLAGS from the environment is respected; the flags below are given on the command line
# and so take precedence over it (notably -mod=readonly over any -mod in GOFLAGS).
GO_BUILD_FLAGS=(-mod=readonly -trimpath -buildvcs=false)
# Only creating a new wrapper module needs to write go.mod/go.sum: force -mod=mod there alone.
go_modmod() { GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" go "$@"; }

usage() {
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

fmt_duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

check_version() { # check_version <v>  (vX.Y.Z)
	[[ "$1" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "error: version must look like v1.2.3, got '$1'" >&2; exit 2; }
}

# Temporary build directories live under bin/ (same filesystem as the outputs, so the final
# mv is an atomic rename) and are removed on exit, whatever happens.
TMPDIRS=()
cleanup() { local d; for d in "${TMPDIRS[@]+"${TMPDIRS[@]}"}"; do rm -rf "$d"; done; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# new_tmp sets TMP (not printed: a $(...) subshell would lose the TMPDIRS registration).
new_tmp() { mkdir -p "$BIN"; TMP="$(mktemp -d "$BIN/.tmp.XXXXXX")"; TMPDIRS+=("$TMP"); }

# install_atomic <src-file> <dst-file>: rename into place (never a half-written dst).
install_atomic() { mkdir -p "$(dirname "$2")"; chmod 0755 "$1"; mv -f "$1" "$2"; }

# --- etcd ------------------------------------------------------------------------------------

# reports <file> <args...> <expected-line>: the binary exists and prints that exact line.
# (Output is captured first: `cmd | grep -q` fails under pipefail when grep exits early.)
reports() {
	local out want="${*: -1}"
	[[ -x "$1" ]] || return 1
	out="$("${@:1:$#-1}" 2>/dev/null)" || return 1
	grep -qxF -- "$want" <<<"$out"
}

etcd_ok() { # etcd_ok <dir> <v>: all three binaries present and reporting version <v>
	local dir=$1 want=${2#v}
	reports "$dir/etcd" --version "etcd Version: $want" &&
		reports "$dir/etcdctl" version "etcdctl version: $want" &&
		reports "$dir/etcdutl" version "etcdutl version: $want"
}

new_etcd_wrapper() { # new_etcd_wrapper <v> <dir>
	local v=$1 dir=$2 tmp template
	log "creating wrapper module ${dir#"$ROOT"/} (commit it) ..."
	new_tmp; tmp=$TMP
	mkdir -p "$tmp/etcd"
	# the main package is the same for every release: copy it from an existing wrapper
	template="$(printf '%s\n' "$SCRIPT_DIR"/etcd/v*/etcd/main.go | sort -V | tail -n1)"
	cp "$template" "$tmp/etcd/main.go"
	cat >"$tmp/go.mod" <<-EOF
		// Wrapper module: pins one etcd release; tools/bins/build.sh builds
		// ./etcd, and the etcdctl and etcdutl main packages (tool directives).
		module github.com/gauntlet-dev/gauntlet/tools/bins/etcd/$v

		go 1.26.0
	EOF
	(cd "$tmp" &&
		go_modmod get "go.etcd.io/etcd/server/v3@$v" &&
		go_modmod get -tool "go.etcd.io/etcd/etcdctl/v3@$v" "go.etcd.io/etcd/etcdutl/v3@$v" &&
		go_modmod mod tidy)
	mkdir -p "$(dirname "$dir")"
	mv "$tmp" "$dir"
	chmod 0755 "$dir"
}

build_etcd() { # build_etcd <v>
	local v=$1 out="$BIN/etcd/$1" mod="$SCRIPT_DIR/etcd/$1" tmp start f
	if etcd_ok "$out" "$v"; then
		log "reusing bin/etcd/$v/{etcd,etcdctl,etcdutl} ($v)"
		return 0
	fi
	[[ -f "$mod/go.mod" ]] || new_etcd_wrapper "$v" "$mod"
	start=$SECONDS
	log "building etcd $v (etcd, etcdctl, etcdutl) ..."
	new_tmp; tmp=$TMP
	(cd "$mod" && go build "${GO_BUILD_FLAGS[@]}" \
		-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$v" \
		-o "$tmp/" ./etcd go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdutl/v3)
	etcd_ok "$tmp" "$v" || { echo "error: built etcd binaries do not report version $v" >&2; exit 1; }
	for f in etcd etcdctl etcdutl; do install_atomic "$tmp/$f" "$out/$f"; done
	log "building etcd $v ... done in $(fmt_duration $((SECONDS - start))) -> bin/etcd/$v/"
}

# --- kube-apiserver, kubectl ----------------------------------------------------------------
# Both come from one wrapper module per Kubernetes release: tools/bins/kube-apiserver/<v>/.

k8s_ok() { # k8s_ok <cmd> <file> <v>
	case "$1" in
	kubectl) reports "$2" version --client "Client Version: $3" ;;
	*) reports "$2" --version "Kubernetes $3" ;;
	esac
}

new_k8s_wrapper() { # new_k8s_wrapper <v> <dir>
	local v=$1 dir=$2 staging_v="v0.${1#v1.}" tmp gomod
	log "creating wrapper module ${dir#"$ROOT"/} (commit it) ..."
	new_tmp; tmp=$TMP
	gomod="$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -f "$gomod" ]] || { echo "error: cannot download k8s.io/kubernetes@$v" >&2; exit 1; }
	{
		echo "// Wrapper module: builds k8s.io/kubernetes/cmd/{kube-apiserver,kubectl} at one pinned"
		echo "// release. k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them"
		echo "// with ./staging paths, which a dependent module cannot see; hence the replaces below."
		echo "module github.com/gauntlet-dev/gauntlet/tools/bins/kube-apiserver/$v"
		echo
		echo "go 1.26.0"
		echo
		echo "require k8s.io/kubernetes $v"
		echo
		echo "replace ("
		# every staging module k8s.io/kubernetes requires (at v0.0.0)
		sed -n '/^require (/,/^)/p' "$gomod" | awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' |
			while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_v"; done
		echo ")"
	} >"$tmp/go.mod"
	(cd "$tmp" &&
		go_modmod get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$v" "k8s.io/kubernetes/cmd/kubectl@$v" &&
		go_modmod mod tidy)
	mkdir -p "$(dirname "$dir")"
	mv "$tmp" "$dir"
	chmod 0755 "$dir"
}

build_k8s() { # build_k8s <cmd> <v>: cmd is kube-apiserver or kubectl
	local cmd=$1 v=$2 out="$BIN/k8s/$2/$1" mod="$SCRIPT_DIR/kube-apiserver/$2" tmp start major minor ld p
	if k8s_ok "$cmd" "$out" "$v"; then
		log "reusing bin/k8s/$v/$cmd ($v)"
		return 0
	fi
	[[ -f "$mod/go.mod" ]] || new_k8s_wrapper "$v" "$mod"
	major="${v#v}"
	minor="${major#*.}"
	major="${major%%.*}"
	minor="${minor%%.*}"
	ld="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
	done
	start=$SECONDS
	log "building $cmd $v ..."
	new_tmp; tmp=$TMP
	(cd "$mod" && go build "${GO_BUILD_FLAGS[@]}" -tags providerless -ldflags "$ld" \
		-o "$tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd")
	k8s_ok "$cmd" "$tmp/$cmd" "$v" || { echo "error: built $cmd does not report $v" >&2; exit 1; }
	install_atomic "$tmp/$cmd" "$out"
	log "building $cmd $v ... done in $(fmt_duration $((SECONDS - start))) -> bin/k8s/$v/$cmd"
}

# --- versitygw: the S3-compatible server the backup tests store into ---------------------------

build_versitygw() { # build_versitygw <v>
	local v=$1 out="$BIN/versitygw/$1/versitygw" mod="$SCRIPT_DIR/versitygw/$1" tmp start
	if [[ -x "$out" ]] && grep -qF "${v}" <<<"$("$out" --version 2>/dev/null)"; then
		log "reusing bin/versitygw/$v/versitygw ($v)"
		return 0
	fi
	if [[ ! -f "$mod/go.mod" ]]; then
		log "creating wrapper module ${mod#"$ROOT"/} (commit it) ..."
		new_tmp; tmp=$TMP
		cat >"$tmp/go.mod" <<-EOF
			// Wrapper module: pins one versitygw release; tools/bins/build.sh builds
			// its versitygw command (a tool directive).
			module github.com/gauntlet-dev/gauntlet/tools/bins/versitygw/$v

			go 1.26.0
		EOF
		(cd "$tmp" && go_modmod get -tool "github.com/versity/versitygw/cmd/versitygw@$v" && go_modmod mod tidy)
		mkdir -p "$(dirname "$mod")"
		mv "$tmp" "$mod"
		chmod 0755 "$mod"
	fi
	start=$SECONDS
	log "building versitygw $v ..."
	new_tmp; tmp=$TMP
	(cd "$mod" && go build "${GO_BUILD_FLAGS[@]}" \
		-ldflags "-s -w -X main.Version=$v" -o "$tmp/versitygw" github.com/versity/versitygw/cmd/versitygw)
	install_atomic "$tmp/versitygw" "$out"
	log "building versitygw $v ... done in $(fmt_duration $((SECONDS - start))) -> bin/versitygw/$v/"
}

# --- envtest assets --------------------------------------------------------------------------

assemble_envtest() { # assemble_envtest <k8s-v> <etcd-v>
	local kv=$1 ev=$2 dir="$BIN/k8s/$1" src="$BIN/etcd/$2/etcd" tmp
	build_etcd "$ev"
	build_k8s kube-apiserver "$kv"
	build_k8s kubectl "$kv"
	if reports "$dir/etcd" --version "etcd Version: ${ev#v}"; then
		log "reusing bin/k8s/$kv/etcd ($ev)"
	else
		new_tmp; tmp=$TMP
		ln "$src" "$tmp/etcd" 2>/dev/null || cp "$src" "$tmp/etcd"
		install_atomic "$tmp/etcd" "$dir/etcd"
		log "placed bin/etcd/$ev/etcd as bin/k8s/$kv/etcd"
	fi
	log "envtest assets ready: KUBEBUILDER_ASSETS=$dir"
}

[[ $# -ge 1 ]] || usage
case "$1" in
etcd)
	[[ $# -eq 2 ]] || usage
	check_version "$2"
	build_etcd "$2"
	;;
kube-apiserver | kubectl)
	[[ $# -eq 2 ]] || usage
	check_version "$2"
	build_k8s "$1" "$2"
	;;
versitygw)
	[[ $# -eq 2 ]] || usage
	check_version "$2"
	build_versitygw "$2"
	;;
envtest)
	[[ $# -eq 3 ]] || usage
	check_version "$2"
	check_version "$3"
	assemble_envtest "$2" "$3"
	;;
*) usage ;;
esac
