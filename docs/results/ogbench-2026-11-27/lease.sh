#!/bin/bash
# Eighth-session lease (4 x H200, 64 CPUs), three device calls: set-up + start (sweep9 part) + poll,
# then "bash poll.sh 555 4" twice. The scripts as run, concatenated.

# --- setup.sh
# One-time set-up on a fresh device machine: GL libraries, wheels, a copy of the repo in /tmp/repo.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
mkdir -p /tmp/repo && tar --exclude=.whl --exclude=.gl --exclude=.git -cf - . | tar -xf - -C /tmp/repo

# --- sweep9.sh
# Eighth-session lease: scene-play and puzzle-4x4-play (MuJoCo 3.2.7), MQE and GCIQL each on a GPU of its own.
mkdir -p /tmp/sweep/logs
(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; nproc; free -g; python3 -c "import mujoco; print('mujoco', mujoco.__version__)") > /tmp/sweep/logs/machine.txt 2>&1
cd /tmp/repo && STEPS=100000 setsid nohup bash scripts/ogbench_sweep.sh /tmp/sweep scene-play-v0:0:0:3:mqe \
    scene-play-v0:1:0:3:gciql puzzle-4x4-play-v0:2:0:3:mqe puzzle-4x4-play-v0:3:0:3:gciql > /tmp/sweep.out 2>&1 < /dev/null &

# --- poll.sh
# poll.sh SECONDS RUNS: wait up to SECONDS (or until RUNS runs are done), report, pack the sweep into $OUT.
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && [ $(ls $W/done 2>/dev/null | wc -l) -lt $2 ]; do sleep 5; done
cat /tmp/sweep.out; for f in $W/done/*; do echo "done $f: $(cat $f)"; done
uptime; free -g | sed -n 2p; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
for f in $W/logs/*-v0-*.log; do echo "== $f"; tail -n 2 $f | cut -c1-300; done
for m in $(find $W/runs -name metrics.jsonl); do echo "== $m $(wc -l < $m) lines"; grep success $m | tail -3 | cut -c1-400; done
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache --exclude=probe .
ls -la $OUT
