#!/bin/bash
# Device set-up, sourced at the start of each call from the repository root: the carried wheels
# (.whl: tyro, MuJoCo...) into /tmp/site once; the package paths.
[ -f /tmp/whl.done ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl && touch /tmp/whl.done; }
export PYTHONPATH=/tmp/site:$(pwd)/packages/mqe-client/src:$(pwd) PYTHONUNBUFFERED=1 MUJOCO_GL=egl
