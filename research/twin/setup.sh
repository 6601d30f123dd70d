#!/bin/bash
# Device set-up, sourced at the start of each call from the repository root: the carried wheels
# (.whl: tyro, MuJoCo...) into /tmp/site once; the GL libraries MuJoCo's EGL rendering needs, from
# carried Debian packages (.gl/*.deb: libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2) where
# the machine lacks them; the package paths; `agent_names` (the AGENTS list without :steps),
# `pack_state AGENT` (its latest checkpoint into $OUT/AGENT-state, mqe-transfer with bf16 moments) and
# `export_step AGENT STEP` (that kept checkpoint exported into $OUT/AGENT-STEP.tgz).
[ -f /tmp/whl.done ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl && touch /tmp/whl.done; }
if ! ldconfig -p | grep -q libEGL.so.1 && compgen -G ".gl/*.deb" > /dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f $vendor ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
export PYTHONPATH=/tmp/site:$(pwd)/packages/mqe-client/src:$(pwd) PYTHONUNBUFFERED=1 MUJOCO_GL=egl
agent_names() { for spec in ${AGENTS:-mqe gcbc gciql}; do echo ${spec%%:*}; done; }
pack_state() {
  python3 -m mqe_model.transfer pack --checkpoint /tmp/w/$1 --out $OUT/$1-state --optimizer-dtype bfloat16 2>&1 | tail -1
}
export_step() {
  [ -d /tmp/w/$1/checkpoints/$2 ] || { echo "$1: step $2 not kept"; return; }
  python3 -m mqe_model.export --checkpoint /tmp/w/$1/checkpoints/$2 --out /tmp/w/export/$1-$2 \
    --overwrite 2>&1 | tail -1 && tar czf $OUT/$1-$2.tgz -C /tmp/w/export $1-$2
}
