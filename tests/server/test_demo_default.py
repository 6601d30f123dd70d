"""`mqe-serve` with no --policy serves the bundled demo checkpoint under the name 'demo'."""

from __future__ import annotations

import httpx
from server_helpers import running_server

from mqe_model import demo
from mqe_model.policy import load_policy


def test_no_policy_serves_the_bundled_demo():
    step_dir = demo.demo_step_dir()  # a missing demo checkpoint fails here, with how to restore it
    with running_server(["--batch-buckets", "1"]) as server:
        meta = httpx.get(server.url + "/v1/metadata", timeout=10).json()
        log = server.log.read_text()
    (policy,) = meta["policies"]
    assert policy["name"] == "demo" and meta["default_policy"] == "demo"
    assert policy["step"] == int(step_dir.name) and policy["algorithm"] == "mqe"
    assert policy["image"] == {"height": 64, "width": 64, "resize": "area"} and policy["action_dim"] == 7
    assert policy["fingerprint"] == load_policy(step_dir).fingerprint
    assert sum("serving the bundled demo policy as 'demo'" in line for line in log.splitlines()) == 1
    # the flags are set before the backend starts; the CPU ignores this one, and the test's own stay
    (flags,) = [line.split("XLA_FLAGS: ")[1] for line in log.splitlines() if "XLA_FLAGS: " in line]
    assert flags.split() == ["--xla_backend_optimization_level=0", "--xla_gpu_graph_min_graph_size=1"]

