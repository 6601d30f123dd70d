#!/bin/bash
# peer_train.sh SEED STEPS SAVE_DIR: the public MQE code's own main.py (tree at $PEER, default /tmp/peer) on
# OGBench's scene-play-v0 files under ~/.ogbench/data, with the paper's scene-play BC weight (alpha 1.0;
# the public get_config's default is 0.1) and every other setting the public default (= the paper's table).
# Its in-training evaluation is off (--eval_tasks=0: main.py would otherwise score step 1 and then run
# the 5 tasks one after another); peer_eval.py scores the saved params_STEPS.pkl per task instead.
SEED=${1:?seed}; STEPS=${2:?steps}; SAVE=${3:?save dir}
PEER=${PEER:-/tmp/peer}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$HERE/stub${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
cd "$PEER" && exec python3 main.py --env_name=scene-play-v0 --agent=agents/mqe.py --agent.alpha=1.0 \
  --seed="$SEED" --train_steps="$STEPS" --log_interval="${LOG_INTERVAL:-5000}" --eval_interval="$STEPS" \
  --eval_tasks=0 --video_episodes=0 --save_interval="${SAVE_INTERVAL:-$STEPS}" --run_group=peer --save_dir="$SAVE"
