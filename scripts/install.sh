#!/usr/bin/env bash
# Installs mqe-deploy into a virtual environment. Used by CI (.ci/run) and by the Docker
# images, so that CI exercises the same install path users get.
#   bash scripts/install.sh [VENV_DIR] [EXTRAS]
#   VENV_DIR defaults to .venv; EXTRAS (comma separated) defaults to all,dev.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
extras="${2:-all,dev}"

# System libraries for headless MuJoCo rendering, for the simulation twin only (extras sim or all),
# and only where we may install them. MQE_INSTALL_SKIP_APT=1: the caller installs them (.ci/run, in
# parallel with pip).
needs_gl=0
case ",${extras}," in *,sim,*|*,all,*) needs_gl=1 ;; esac
[ "${MQE_INSTALL_SKIP_APT:-0}" = 1 ] && needs_gl=0
if [ "$needs_gl" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  for pkg in libosmesa6 libegl1 libgl1; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[${extras}]"
echo "installed mqe-deploy[${extras}] into ${venv}"
