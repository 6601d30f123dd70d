"""MuJoCo twin of the WidowX 250 Bridge setup: model, environment, demonstrators, scorers, data.

`WidowXSimEnv` is imported lazily so that `import robot_client.sim` works without mujoco; using it
without mujoco raises one clear line saying what to install.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
from typing import TYPE_CHECKING, Any

MISSING_MUJOCO = "mujoco not installed: pip install 'mqe-deploy[sim]'"

if TYPE_CHECKING:
    from robot_client.sim.env import SimConfig, WidowXSimEnv


EGL_VENDOR_DIRS = ("/usr/share/glvnd/egl_vendor.d", "/etc/glvnd/egl_vendor.d")


def _egl_usable() -> bool:
    # libEGL alone is only the glvnd dispatcher; without a vendor (e.g. Debian libegl-mesa0 with
    # libgl1-mesa-dri, or the NVIDIA driver) it cannot create a context
    vendors = [f for d in EGL_VENDOR_DIRS for f in glob.glob(os.path.join(d, "*.json"))]
    return bool(ctypes.util.find_library("EGL")) and bool(vendors)


def select_gl_backend() -> str:
    """Set MUJOCO_GL for headless rendering unless the user chose one: egl if usable, else osmesa."""
    if not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl" if _egl_usable() else "osmesa"
    return os.environ["MUJOCO_GL"]


def require_mujoco() -> Any:
    """Import mujoco (after choosing a headless GL backend) or raise RuntimeError with the fix."""
    select_gl_backend()
    try:
        import mujoco
    except ImportError:
        raise RuntimeError(MISSING_MUJOCO) from None
    return mujoco


def __getattr__(name: str) -> Any:
    if name in ("WidowXSimEnv", "SimConfig"):
        require_mujoco()
        from robot_client.sim import env

        return getattr(env, name)
    raise AttributeError(f"module 'robot_client.sim' has no attribute {name!r}")


__all__ = ["MISSING_MUJOCO", "SimConfig", "WidowXSimEnv", "require_mujoco", "select_gl_backend"]
