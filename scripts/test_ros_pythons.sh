#!/usr/bin/env bash
# The robot client on the Pythons of ROS: Noetic's 3.8 and Humble's 3.10. For each, a fresh venv gets
# the client-only install of docs/operator_guide.md (the `robot` extra: no JAX) and the test tools,
# and runs tests/robot_client and tests/mqe_client there (the twin's tests skip: MuJoCo is not part of that install).
# vermin first checks that the client's files need nothing newer than 3.8.
#
#   bash scripts/test_ros_pythons.sh            # after scripts/install.sh .venv all,dev
#
# Interpreters come from uv (one it manages, or `uv python install`), else pyenv, else PATH. Where
# none is found the script says so in one line per version, marks the run SKIPPED, and exits 0;
# MQE_REQUIRE_ROS_PYTHONS=1 makes that an error.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
VENVS=${MQE_ROS_VENVS:-$PWD/.venv-ros}
TEST_TOOLS=(pytest pytest-xdist httpx hypothesis "modern_robotics>=1.1")

# What the client imports on the robot's computer, in the repository's files.
.venv/bin/vermin --no-tips --violations -q -t=3.8- --backport dataclasses --exclude-regex 'robot_client/sim/' \
    robot_client eval_protocols/tasks.py eval_protocols/sheets.py packages/mqe-client/src/mqe_client tests/client_helpers.py \
    tests/robot_client/fake_interbotix.py tests/robot_client/widowx_helpers.py tests/robot_client/reset_sweep.py

runs_python() {  # $1: a candidate interpreter, $2: the version it must be
    [ -x "$1" ] && "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$2'.split('.'))))" 2>/dev/null
}

find_python() {  # the path of a Python $1, or nothing
    local version=$1 found candidate
    found=$(UV_PYTHON_PREFERENCE=only-managed "$UV" python find "$version" 2>/dev/null) && runs_python "$found" "$version" \
        && { echo "$found"; return; }
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python"$version" \
                     "$(command -v "python$version" || true)"; do
        runs_python "$candidate" "$version" && { echo "$candidate"; return; }
    done
    if timeout 120 "$UV" python install "$version" >/dev/null 2>&1; then
        found=$(UV_PYTHON_PREFERENCE=only-managed "$UV" python find "$version" 2>/dev/null) && runs_python "$found" "$version" \
            && echo "$found"
    fi
}

skipped=()
for version in 3.8 3.10; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "test_ros_pythons: SKIPPED Python $version: no interpreter (no uv-managed one, uv python install failed, none under pyenv or on PATH)"
        skipped+=("$version")
        continue
    fi
    venv="$VENVS/py$version"
    rm -rf "$venv"
    "$UV" venv -q --python "$python" "$venv"
    VIRTUAL_ENV="$venv" "$UV" pip install -q -e "packages/mqe-client[opencv]" -e ".[robot]" "${TEST_TOOLS[@]}"
    if ! "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('jax', 'flax', 'mujoco', 'fastapi')))"; then
        echo "test_ros_pythons: the client-only install pulled in the training, serving or twin stack" >&2
        exit 1
    fi
    echo "test_ros_pythons: tests/robot_client and tests/mqe_client on $("$venv/bin/python" --version) ($python)"
    "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider tests/robot_client tests/mqe_client
done
if [ ${#skipped[@]} -gt 0 ] && [ "${MQE_REQUIRE_ROS_PYTHONS:-0}" = 1 ]; then
    echo "test_ros_pythons: Python ${skipped[*]} missing and MQE_REQUIRE_ROS_PYTHONS=1" >&2
    exit 1
fi
