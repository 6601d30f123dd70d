"""Train the protocol's scene-play MQE (ogbench_state, alpha 1.0) briefly on the CPU, printing psi(g)'s
squared centre and spread every 50 updates, and save the params.

    MUJOCO_GL=egl mqe-ogbench-data scene-play-v0 --out-dir /tmp/prec/data --episodes 40 --workers 2
    JAX_PLATFORMS=cpu PYTHONPATH=. python docs/results/ogbench-2026-12-01b/train_short.py \\
        /tmp/prec/data/scene-play-v0.npz 400 /tmp/prec/params.pkl
"""
import json
import pickle
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from mqe_model.agents import mqe, registry
from mqe_model.data.prepare import prepare

data, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
config = registry.apply_overrides(mqe.get_config("ogbench_state"), ("alpha=1.0",))
sampler = registry.make_sampler("mqe", prepare(data).dataset, config)
rng = np.random.default_rng(0)
agent = mqe.MQEAgent.create(0, {k: jnp.asarray(v) for k, v in sampler.sample(rng, config.batch_size).items()},
                            config)
shown = ("critic/latent_centre_sq", "critic/latent_spread_sq", "critic/dist_all", "critic/positive_steps")
start = time.perf_counter()
for i in range(steps + 1):
    batch = {k: jnp.asarray(v) for k, v in sampler.sample(rng, config.batch_size).items()}
    if i % 50 == 0:
        _, info = mqe.critic_loss(agent.params, batch, config)
        print(json.dumps({"step": i, "s": round(time.perf_counter() - start, 1),
                          **{k: round(float(info[k]), 4) for k in shown}}), flush=True)
    if i < steps:
        agent, _ = agent.update(batch)
with open(out, "wb") as f:
    pickle.dump(jax.device_get(agent.params), f)
