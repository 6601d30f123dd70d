"""Robot client: control loop, robot backends (WidowX, MuJoCo twin), safety helpers.

Never imports jax, flax or fastapi; mujoco is imported only inside `robot_client.sim`.
"""
