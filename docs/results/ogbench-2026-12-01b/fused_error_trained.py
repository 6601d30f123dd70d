"""The fused all-pairs distance before (about the origin) and after (about y's mean) against the
elementwise one, on a batch of the critic that train_short.py saved: errors in steps, psi(g)'s centre and
spread, and the critic loss and its gradient against `pairwise=naive`.

    JAX_PLATFORMS=cpu PYTHONPATH=. python docs/results/ogbench-2026-12-01b/fused_error_trained.py \\
        /tmp/prec/params.pkl /tmp/prec/data/scene-play-v0.npz
"""
import dataclasses
import json
import pickle
import sys

import jax
import jax.numpy as jnp
import numpy as np
from before import quasimetric_before  # this folder, beside the script

from mqe_model import quasimetric
from mqe_model.agents import mqe, registry
from mqe_model.data.prepare import prepare

before = quasimetric_before()
config = registry.apply_overrides(mqe.get_config("ogbench_state"), ("alpha=1.0",))
with open(sys.argv[1], "rb") as f:
    critic = pickle.load(f)["critic"]
sampler = registry.make_sampler("mqe", prepare(sys.argv[2]).dataset, config)
batch = {k: jnp.asarray(v) for k, v in sampler.sample(np.random.default_rng(0), config.batch_size).items()}
forward = mqe.critic_forward(critic, batch, config)
out = {}
for name, (x, y) in {"dist": (forward.phi, forward.psi_goals),
                     "dist_w": (forward.psi_waypoints, forward.psi_goals)}.items():
    naive = quasimetric.mrn_pairwise_naive(x, y, config.num_components)
    for label, fn in (("before", before.mrn_pairwise), ("after", quasimetric.mrn_pairwise)):
        err = np.abs(np.asarray(fn(x, y, config.num_components) - naive)) / config.step_scale
        out[f"{name} {label}: |error| steps, mean / max"] = [float(err.mean()), float(err.max())]
psi = np.asarray(forward.psi_goals)
centre = psi.mean(axis=-2, keepdims=True)
out["psi(g) squared centre"] = float((centre ** 2).sum(-1).mean())
out["psi(g) squared spread"] = float(((psi - centre) ** 2).sum(-1).mean())


def loss_and_grad(pairwise: str, fused=None):
    saved = mqe.PAIRWISE["fused"]
    mqe.PAIRWISE["fused"] = fused or saved
    try:
        cfg = dataclasses.replace(config, pairwise=pairwise)
        loss, grad = jax.value_and_grad(lambda p: mqe.critic_loss({"critic": p}, batch, cfg)[0])(critic)
        return float(loss), np.concatenate([np.ravel(g) for g in jax.tree_util.tree_leaves(grad)])
    finally:
        mqe.PAIRWISE["fused"] = saved


naive_loss, naive_grad = loss_and_grad("naive")
for label, fn in (("before", before.mrn_pairwise), ("after", quasimetric.mrn_pairwise)):
    loss, grad = loss_and_grad("fused", fn)
    out[f"critic loss {label} - naive"] = loss - naive_loss
    out[f"critic gradient {label}: relative error"] = float(np.linalg.norm(grad - naive_grad)
                                                             / np.linalg.norm(naive_grad))
print(json.dumps(out, indent=1))
