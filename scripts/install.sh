#!/usr/bin/env bash
# Installs mqe-deploy into a virtual environment. Used by CI (.ci/run) and by the Docker
# images, so that CI exercises the same install path users get.
#   bash scripts/install.sh [VENV_DIR] [EXTRAS]
#   VENV_DIR defaults to .venv; EXTRAS (comma separated) defaults to all,dev.
#   MQE_INSTALL_OPTIONAL_DEBS: Debian packages to install too where possible, a warning if not
#   (CI's docker-compose).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
extras="${2:-all,dev}"

# System libraries for headless MuJoCo rendering, for the simulation twin only (extras sim or all),
# and only where we may install them. They install in the background while pip runs, with one
# apt-get update for them and the optional packages.
missing="" optional=""
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  case ",${extras}," in *,sim,*|*,all,*) for pkg in libosmesa6 libegl1 libgl1; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done ;; esac
  for pkg in ${MQE_INSTALL_OPTIONAL_DEBS:-}; do
    dpkg -s "$pkg" >/dev/null 2>&1 || optional="$optional $pkg"
  done
fi
apt_log=$(mktemp) apt_pid=""
if [ -n "$missing$optional" ]; then
  (
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    [ -z "$missing" ] || apt-get install -y -qq --no-install-recommends $missing >/dev/null
    [ -z "$optional" ] || apt-get install -y -qq $optional >/dev/null \
      || echo "warning: could not install$optional; what needs it will be skipped"
  ) > "$apt_log" 2>&1 &
  apt_pid=$!
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# The wire package comes from this repository (packages/mqe-client), in the same resolve.
"$venv/bin/python" -m pip install -q -e packages/mqe-client -e ".[${extras}]"
if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
  cat "$apt_log" >&2
  if [ -n "$missing" ]; then
    echo "error: could not install$missing (headless MuJoCo rendering; log above)" >&2
    exit 1
  fi
  echo "warning: could not install$optional; what needs it will be skipped" >&2
fi
cat "$apt_log" && rm -f "$apt_log"
echo "installed mqe-deploy[${extras}] into ${venv}"
