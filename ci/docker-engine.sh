#!/usr/bin/env bash
# Makes sure a Docker engine answers. If one already does (a developer's
# Docker Desktop, a CI runner's dockerd), nothing is touched. Otherwise, on a
# bare Debian machine, it installs Debian's docker.io, applies this machine
# kind's runtime fix and starts dockerd in the background (no systemd here),
# then waits until it answers.
#
# The runtime fix: these VMs lack CAP_SYS_RESOURCE in their capability
# bounding set, so runc cannot start privileged containers (kind nodes) or
# exec into them ("unable to apply caps: operation not permitted"). A small
# wrapper, registered as dockerd's default runtime, drops CAP_SYS_RESOURCE
# from the OCI bundle's capabilities (runc create/run) and from the process
# file (runc exec) before it execs the real runc. See ../shared/DESIGN.md.
set -euo pipefail

log() { echo ">> $(date +%H:%M:%S) docker-engine: $*"; }

if docker info >/dev/null 2>&1; then
  log "an engine already answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown)); leaving it alone"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "docker-engine: no Docker engine answers and this is not root: start your Docker engine, or run $0 as root on a bare Debian machine" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "docker-engine: no Docker engine answers and there is no apt-get: install and start a Docker engine yourself" >&2
  exit 1
fi

start=$(date +%s)
if ! command -v dockerd >/dev/null || ! command -v jq >/dev/null; then
  log "installing Debian's docker.io and jq"
  t=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io jq >/dev/null
  log "installed in $(( $(date +%s) - t ))s: $(dockerd --version)"
fi

wrapper=/usr/local/sbin/runc-capfix
if [ ! -x "$wrapper" ]; then
  log "installing the runtime wrapper $wrapper"
  cat >"$wrapper" <<'EOF'
#!/bin/sh
# Installed by gauntlet's ci/docker-engine.sh: drops CAP_SYS_RESOURCE (absent
# from this machine's capability bounding set) from what runc is asked to
# grant, then runs the real runc.
bundle=""; procfile=""; prev=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a";; --process|-p) procfile="$a";; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; --process=*) procfile="${a#--process=}";; esac
  prev="$a"
done
fix() {
  tmp="$1.capfix.$$"
  /usr/bin/jq "($2 // {}) |= with_entries(.value |= (if type==\"array\" then map(select(. != \"CAP_SYS_RESOURCE\")) else . end))" "$1" >"$tmp" && mv "$tmp" "$1"
}
[ -n "$bundle" ] && [ -f "$bundle/config.json" ] && fix "$bundle/config.json" .process.capabilities
[ -n "$procfile" ] && [ -f "$procfile" ] && fix "$procfile" .capabilities
exec /usr/sbin/runc "$@"
EOF
  chmod 0755 "$wrapper"
fi

mkdir -p /etc/docker
if [ ! -f /etc/docker/daemon.json ]; then
  cat >/etc/docker/daemon.json <<EOF
{
  "runtimes": { "runc-capfix": { "path": "$wrapper" } },
  "default-runtime": "runc-capfix",
  "storage-driver": "overlay2"
}
EOF
fi

logfile=/var/log/gauntlet-dockerd.log
log "starting dockerd (log: $logfile)"
nohup dockerd >"$logfile" 2>&1 &
for i in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "dockerd answers after ${i}s ($(( $(date +%s) - start ))s in all); default runtime: $(docker info --format '{{.DefaultRuntime}}')"
    exit 0
  fi
  sleep 1
done
echo "docker-engine: dockerd did not answer within 60s; the end of $logfile:" >&2
tail -n 30 "$logfile" >&2
exit 1
