"""Robot backends behind one interface (`base.Robot`): the WidowX 250 via interbotix and the twin.

Backends are imported only when chosen, so the real arm's ROS packages and MuJoCo stay optional.
"""

from __future__ import annotations

from robot_client.robots.base import ApplyResult, Robot, RobotNotConnectedError, RobotState

__all__ = ["ApplyResult", "Robot", "RobotNotConnectedError", "RobotState"]
