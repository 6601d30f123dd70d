#!/bin/bash
# Device set-up, sourced at the start of each call from the repository root: the carried wheels
# (.whl: tyro, MuJoCo...) into /tmp/site once; the GL libraries MuJoCo's EGL rendering needs, from
# carried Debian packages (.gl/*.deb: libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2) where
# the machine lacks them; the package paths.
[ -f /tmp/whl.done ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl && touch /tmp/whl.done; }
if ! ldconfig -p | grep -q libEGL.so.1 && compgen -G ".gl/*.deb" > /dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f $vendor ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
export PYTHONPATH=/tmp/site:$(pwd)/packages/mqe-client/src:$(pwd) PYTHONUNBUFFERED=1 MUJOCO_GL=egl
