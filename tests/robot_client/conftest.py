"""Fixtures for the robot client tests: headless rendering for the twin."""

from robot_client.sim import select_gl_backend

select_gl_backend()  # before anything imports mujoco: headless EGL or OSMesa, never GLFW
