#!/usr/bin/env bash
# Installs the real openpi-client into its own virtual environment: its pins (numpy < 2) conflict
# with this project's, so the test of the openpi websocket endpoint drives the server from there.
#   bash scripts/install_openpi_client.sh [VENV_DIR]     (default .venv-openpi)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-openpi}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# openpi_client.websocket_client_policy imports typing_extensions, which the package does not declare.
"$venv/bin/python" -m pip install -q "openpi-client==0.1.2" typing_extensions
echo "installed openpi-client into ${venv}"
