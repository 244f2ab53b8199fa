#!/usr/bin/env bash
# Runs shellcheck (warnings and errors) over every tracked shell script.
# Where shellcheck is missing, on a Debian machine as root, it installs
# Debian's package first (waiting for the apt lock rather than failing).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v shellcheck >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "shellcheck: not installed; install it (Debian: apt-get install shellcheck) and run make lint again" >&2
    exit 1
  fi
  echo ">> $(date +%H:%M:%S) shellcheck: installing Debian's package"
  opts=(-o "DPkg::Lock::Timeout=${APT_LOCK_TIMEOUT:-600}")
  DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" install -y -qq shellcheck >/dev/null \
    || { apt-get "${opts[@]}" update -qq && DEBIAN_FRONTEND=noninteractive apt-get "${opts[@]}" install -y -qq shellcheck >/dev/null; }
fi

mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
shellcheck -S warning "${scripts[@]}"
# Under pipefail, `cmd | grep -q x` fails when grep exits at its first match
# and cmd dies of SIGPIPE (exit 141): a step that passes where the output is
# short fails where it is long. Capture the output first.
piped=()
for f in "${scripts[@]}"; do
  grep -q pipefail "$f" || continue
  while IFS= read -r hit; do piped+=("$f:$hit"); done < <(grep -n -E '[|][[:space:]]*grep[[:space:]]+(-[a-zA-Z]*q|--quiet)' "$f" \
    | grep -v -E '^[0-9]+:[[:space:]]*(#|echo )' || true)
done
if [ "${#piped[@]}" -gt 0 ]; then
  echo "shellcheck: a pipe into grep -q under pipefail (capture the output first):" >&2
  printf '  %s\n' "${piped[@]}" >&2
  exit 1
fi
echo "shellcheck: ${#scripts[@]} scripts, no warning ($(shellcheck --version | sed -n 's/^version: //p'))"
