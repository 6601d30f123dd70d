#!/usr/bin/env bash
# Several rows of the OGBench table on one multi-GPU machine, as many updates as fit a time budget.
#
#   scripts/ogbench_sweep.sh WORK DATASET:GPU:SECONDS:EVALS [...]
#
# For each DATASET it generates the data (mqe-ogbench-data, all datasets at once, the cores shared
# among them), then starts one `mqe-ogbench-repro` per agent in AGENTS on GPU `GPU`, the SEEDS seeds
# vmapped in one run, all agents of a dataset sharing its GPU. The number of updates is what fits
# SECONDS: a probe first trains every agent at once on one GPU (as the real runs will share theirs)
# and measures the slowest agent's updates per second; each dataset's runs then get
# SAFETY x rate x SECONDS updates, rounded down to a multiple of 10,000 (same for every agent of the
# dataset, so they compare at equal updates). Evaluations every tenth of the run, the last EVALS of
# them only (3: just the ones OGBench's score averages; 10: a learning curve).
#
# The runs start in their own process session and outlive this script: poll WORK/logs and
# WORK/runs, or wait for WORK/done/<dataset>-<agent> (its content is the exit code). Rows land in
# WORK/runs/<dataset>/<agent>.{json,md}. WORK/plan.json records the probe and the chosen updates.
#
# SECONDS covers the updates only. Evaluations run on the CPU beside them, in single-threaded worker
# processes (EVAL_WORKERS per run; by default the cores shared among all runs), and the ones after the
# last update add their own time: an evaluation costs seeds x 5 tasks x 50 episodes x the episode
# length x the time per step (pointmaze ~0.2 ms, manipulation ~2 ms: `benchmarks/ogbench_eval.py`),
# e.g. ~26 CPU-minutes for one of 4 scene-play seeds.
#
# Environment: AGENTS ("mqe gciql gcbc"), SEEDS (4), PRESET (ogbench_state), SAFETY (0.8),
# EVAL_WORKERS (per run; default: the cores shared among the runs, at least 2), PROBE_SECONDS (20),
# EXTRA_DATA_ARGS / EXTRA_REPRO_ARGS (tiny tests), MIN_STEPS (10000; the rounding unit too).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 WORK DATASET:GPU:SECONDS:EVALS [...]  (e.g. scene-play-v0:1:1000:3)" >&2
    exit 2
fi
work=$(realpath -m "$1"); shift
agents=(${AGENTS:-mqe gciql gcbc})
seeds=${SEEDS:-4}
preset=${PRESET:-ogbench_state}
safety=${SAFETY:-0.8}
probe_seconds=${PROBE_SECONDS:-20}
unit=${MIN_STEPS:-10000}
python=${PYTHON:-python3}
for entry in "$@"; do
    IFS=: read -r name gpu seconds evals <<<"$entry"
    if [[ -z "$name" || ! "$gpu" =~ ^[0-9]+$ || ! "$seconds" =~ ^[0-9]+$ || ! "$evals" =~ ^([1-9]|10)$ ]]; then
        echo "$0: $entry: expected DATASET:GPU:SECONDS:EVALS with EVALS in 1..10 (e.g. scene-play-v0:1:1000:3)" >&2
        exit 2
    fi
done
mkdir -p "$work"/{data,runs,logs,done,probe}
# One compilation cache for the probe and every run: runs of the same observation and action sizes
# (navigate and stitch of one maze, say) compile their update once (MQE: ~100 s on an H100 machine).
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}
log() { echo "$(date +%T) $*" | tee -a "$work/logs/sweep.log"; }
cores=$(nproc)
runs=$(( $# * ${#agents[@]} ))
eval_workers=${EVAL_WORKERS:-$(( (cores - runs) / runs > 2 ? (cores - runs) / runs : 2 ))}
# The probe runs while the data is generated: leave its processes a core each (and one spare), or
# they are starved and the updates per second come out low.
free=$(( cores - ${#agents[@]} - 1 ))
gen_workers=$(( free / $# > 1 ? free / $# : 1 ))

declare -A gen_pid
for entry in "$@"; do
    name=${entry%%:*}
    $python -m mqe_model.ogbench.generate "$name" --out-dir "$work/data" --workers "$gen_workers" --no-progress \
        ${EXTRA_DATA_ARGS:-} >"$work/logs/data-$name.log" 2>&1 &
    gen_pid[$name]=$!
done
log "generating $# dataset(s), $gen_workers worker(s) each; $runs run(s) will have $eval_workers evaluation worker(s) each"

# Probe on the first dataset's data as soon as it exists, while the others are still generating.
first=${1%%:*}
wait "${gen_pid[$first]}" || { log "generation of $first failed: $work/logs/data-$first.log"; exit 1; }
data_file() { ls "$work/data/$1"*.npz | grep -v -- '-val\.npz$' | head -1; }
probe_gpu=$(cut -d: -f2 <<<"$1")
probe_pids=()
for agent in "${agents[@]}"; do
    CUDA_VISIBLE_DEVICES=$probe_gpu XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 $python -m mqe_model.train --agent "$agent" --preset "$preset" \
        --data "$(data_file "$first")" --workdir "$work/probe/$agent" --overwrite --steps 10000000 \
        --num-seeds "$seeds" --log-every 100 --save-every 10000000 --no-progress \
        >"$work/logs/probe-$agent.log" 2>&1 &
    probe_pids+=($!)
done
last_step() { tail -n 1 "$work/probe/$1/metrics.jsonl" 2>/dev/null | $python -c "import json,sys; print(json.loads(sys.stdin.read() or '{\"step\": -1}')['step'])"; }
for _ in $(seq 300); do  # every agent logging: all compiled and sharing the GPU
    ready=1
    for agent in "${agents[@]}"; do [[ $(last_step "$agent") -ge 0 ]] || ready=0; done
    [[ $ready == 1 ]] && break
    sleep 1
done
declare -A before
for agent in "${agents[@]}"; do before[$agent]=$(last_step "$agent"); done
t0=$(date +%s.%N); sleep "$probe_seconds"; t1=$(date +%s.%N)
rates=()
for agent in "${agents[@]}"; do
    rates+=("$agent=$($python -c "print(($(last_step "$agent") - ${before[$agent]}) / ($t1 - $t0))")")
done
kill "${probe_pids[@]}" 2>/dev/null || true
wait "${probe_pids[@]}" 2>/dev/null || true
log "probe, ${#agents[@]} agent(s) x $seeds seeds on one GPU: ${rates[*]} updates/s"

for name in "${!gen_pid[@]}"; do
    wait "${gen_pid[$name]}" || { log "generation of $name failed: $work/logs/data-$name.log"; exit 1; }
done
log "data ready"

plan=$($python - "$work" "$safety" "$unit" "$seeds" "$preset" "${rates[*]}" "$@" <<'EOF'
import json, sys
work, safety, unit, seeds, preset, rates, *entries = sys.argv[1:]
rates = {a: float(r) for a, r in (item.split("=") for item in rates.split())}
slowest = min(rates.values())
plan = {"probe_updates_per_s": rates, "safety": float(safety), "seeds": int(seeds), "preset": preset, "rows": []}
for entry in entries:
    name, gpu, seconds, evals = entry.split(":")
    steps = max(int(unit), int(float(safety) * slowest * int(seconds)) // int(unit) * int(unit))
    every = steps // 10
    plan["rows"].append({"dataset": name, "gpu": int(gpu), "seconds": int(seconds), "steps": steps,
                         "eval_every": every, "eval_start": steps - (int(evals) - 1) * every})
json.dump(plan, open(f"{work}/plan.json", "w"), indent=2)
for row in plan["rows"]:
    print(row["dataset"], row["gpu"], row["steps"], row["eval_every"], row["eval_start"])
EOF
)
seed_list=$(seq -s ' ' 0 $((seeds - 1)))
while read -r name gpu steps every start; do
    for agent in "${agents[@]}"; do
        log "start $name $agent on GPU $gpu: $steps updates, evaluations every $every from $start"
        CUDA_VISIBLE_DEVICES=$gpu XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 setsid bash -c \
            "$python -m mqe_model.ogbench.reproduce $name --agent $agent --preset $preset --seeds $seed_list \
             --vmap-seeds --steps $steps --eval-every $every --eval-start $start --eval-workers $eval_workers \
             --data $(data_file "$name") --runs-dir '$work/runs' --no-progress ${EXTRA_REPRO_ARGS:-}; \
             echo \$? >'$work/done/$name-$agent'" >"$work/logs/$name-$agent.log" 2>&1 </dev/null &
    done
done <<<"$plan"
log "all runs started; rows in $work/runs/<dataset>/<agent>.json"
