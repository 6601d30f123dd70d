"""Score one saved checkpoint of the public MQE code on one OGBench task, with that code's own pieces.

    python peer_eval.py --peer /tmp/peer --run 'RUNS/OGBench/peer/sd000_*' --step 200000 --seed 0 \
        --task 1 --episodes 50 --alpha 1.0 --out peer-seed0-task1.json

It imports the public tree at --peer (its `agents.mqe`, `utils.env_utils`, `utils.evaluation`,
`utils.flax_utils`), builds the agent as `main.py` does, restores `params_<step>.pkl` with the tree's
`restore_agent` and runs the tree's `evaluate` (deterministic: temperature 0, no noise, no video) on
the CPU, as `main.py --eval_on_cpu=1` does. One process per task lets the 5 tasks run at once; `main.py`
runs them one after another inside training.
"""

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True, help="the public impls/ tree (main.py, agents/, utils/)")
    parser.add_argument("--run", required=True, help="run directory of main.py (a glob is fine)")
    parser.add_argument("--step", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True, help="the run's training seed")
    parser.add_argument("--task", type=int, required=True, help="task id, 1..5")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--env", default="scene-play-v0")
    parser.add_argument("--alpha", type=float, default=1.0, help="as trained (the agent's config)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, args.peer)
    import jax
    import numpy as np
    import ogbench
    from agents.mqe import MQEAgent, get_config
    from utils.evaluation import evaluate
    from utils.flax_utils import restore_agent

    # The public evaluate() draws its noise from NumPy's global generator, so the seed goes there.
    np.random.seed(1000 * args.seed + args.task)  # noqa: NPY002
    config = get_config()
    config["alpha"] = args.alpha
    env = ogbench.make_env_and_datasets(args.env, env_only=True)
    env.reset()
    ex_obs = np.zeros((1, *env.observation_space.shape), np.float32)
    ex_act = np.zeros((1, *env.action_space.shape), np.float32)
    agent = MQEAgent.create(args.seed, ex_obs, ex_act, config)
    agent = restore_agent(agent, args.run, args.step)
    agent = jax.device_put(agent, device=jax.devices("cpu")[0])

    start = time.time()
    info, _, _ = evaluate(agent=agent, env=env, task_id=args.task, config=config,
                          num_eval_episodes=args.episodes, num_video_episodes=0, eval_temperature=0,
                          eval_gaussian=None)
    task_name = env.unwrapped.task_infos[args.task - 1]["task_name"]
    row = {"seed": args.seed, "task": args.task, "task_name": task_name, "step": args.step,
           "episodes": args.episodes, "success": float(info["success"]), "seconds": round(time.time() - start, 1)}
    with open(args.out, "w") as f:
        json.dump(row, f)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
