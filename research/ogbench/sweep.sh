#!/usr/bin/env bash
# Several rows of the OGBench table on one multi-GPU machine, as many updates as fit a time budget.
#
#   research/ogbench/sweep.sh WORK DATASET:GPU:SECONDS:EVALS[:AGENT+AGENT...] [...]
#
# For each entry it starts one `mqe-ogbench train` per agent (default: AGENTS) on GPU `GPU`, the
# SEEDS seeds vmapped in one run, the entry's agents sharing that GPU. The data of every dataset is
# generated first (mqe-ogbench data, all datasets at once, the cores shared among them by cost). The number
# of updates is what fits SECONDS: for each distinct set of agents a probe first trains those agents
# at once on the GPU of the set's first entry (as the real runs will share theirs) and measures their
# updates per second; an entry's runs then get SAFETY x rate x SECONDS updates, where rate is what
# each of them does when all stop at the same count (the GPU time-slices, so the fast runs finish
# early and leave it to the slow: `research/ogbench/sweep_plan.py`), rounded down to a multiple of
# MIN_STEPS (the same for every agent of the entry, so they compare at equal updates). Evaluations every tenth of the run, the last EVALS of them only (3: just the ones
# OGBench's score averages; 10: a learning curve).
#
# SECONDS covers the updates only. Evaluations run on the CPU beside them, in single-threaded worker
# processes (EVAL_WORKERS per run; by default every core the training leaves, as memory allows: the runs
# evaluate at different times, and the workers are niced below the training), and the ones after the
# last update add their own time: an evaluation costs seeds x 5 tasks x 50 episodes x the episode
# length x the time per step (pointmaze ~0.2 ms, manipulation ~2 ms: `benchmarks/ogbench_eval.py`),
# e.g. ~26 CPU-minutes for one evaluation of 4 scene-play seeds.
#
# The runs start in their own process session and outlive this script: poll WORK/logs and
# WORK/runs, or wait for WORK/done/<dataset>-<agent> (its content is the exit code). Rows land in
# WORK/runs/<dataset>/<agent>.{json,md} (`mqe-ogbench table WORK/runs` prints them as the table);
# maze MQE runs add WORK/runs/<dataset>/mqe-distances.json (`research/ogbench/distances.py`).
# WORK/plan.json records the probes and the chosen updates. What to keep (rows, metrics, logs; not
# the checkpoints, data or compilation cache): tar czf sweep.tgz -C WORK --exclude=checkpoints
# --exclude=data --exclude=probe --exclude=jax-cache .
#
# STEPS=N skips the probes: every run gets N updates (SECONDS is then not used), e.g. to repeat a
# sweep whose rates are known, without the probes' minutes of compilation and measurement.
#
# Environment: AGENTS ("mqe gciql gcbc"), SEEDS (4), PRESET (ogbench_state), SAFETY (0.8), STEPS,
# EVAL_WORKERS (per run; default: `sweep_plan.evaluation_workers`), PROBE_SECONDS (20),
# EXTRA_DATA_ARGS / EXTRA_REPRO_ARGS (tiny tests), MIN_STEPS (10000; the rounding unit too).
set -euo pipefail

usage="expected DATASET:GPU:SECONDS:EVALS[:AGENT+AGENT...] with EVALS in 1..10 and agents among mqe, gciql, gcbc (e.g. scene-play-v0:1:1000:3 or pointmaze-giant-stitch-v0:2:1200:10:mqe)"
if [[ $# -lt 2 ]]; then
    echo "usage: $0 WORK DATASET:GPU:SECONDS:EVALS[:AGENT+AGENT...] [...]" >&2
    exit 2
fi
work=$(realpath -m "$1"); shift
default_agents=$(tr ' ' '+' <<<"${AGENTS:-mqe gciql gcbc}")
seeds=${SEEDS:-4}
preset=${PRESET:-ogbench_state}
safety=${SAFETY:-0.8}
probe_seconds=${PROBE_SECONDS:-20}
unit=${MIN_STEPS:-10000}
python=${PYTHON:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # the plan and distance scripts beside this one

fixed_steps=${STEPS:-}
if [[ -n "$fixed_steps" && ! "$fixed_steps" =~ ^[1-9][0-9]+$ ]]; then
    echo "$0: STEPS=$fixed_steps: give the updates per run as a whole number >= 10, or leave STEPS unset to probe" >&2
    exit 2
fi

entries=()  # name:gpu:seconds:evals:agents, agents joined by '+'
declare -A run_of gpu_processes
for entry in "$@"; do
    IFS=: read -r name gpu seconds evals agents rest <<<"$entry"
    agents=${agents:-$default_agents}
    if [[ -z "$name" || -n "$rest" || ! "$gpu" =~ ^[0-9]+$ || ! "$seconds" =~ ^[0-9]+$ \
          || ! "$evals" =~ ^([1-9]|10)$ || ! "$agents" =~ ^((mqe|gciql|gcbc)\+)*(mqe|gciql|gcbc)$ ]]; then
        echo "$0: $entry: $usage" >&2
        exit 2
    fi
    for agent in $(tr '+' ' ' <<<"$agents"); do
        if [[ -n "${run_of[$name/$agent]:-}" ]]; then
            echo "$0: $entry: $name with $agent is already in ${run_of[$name/$agent]}; give each run once" >&2
            exit 2
        fi
        run_of[$name/$agent]=$entry
        gpu_processes[$gpu]=$(( ${gpu_processes[$gpu]:-0} + 1 ))
    done
    entries+=("$name:$gpu:$seconds:$evals:$agents")
done
# The runs sharing a GPU share its memory (JAX would otherwise take 75% of it in each process).
memory() { $python -c "print(round(0.9 / ${gpu_processes[$1]}, 3))"; }
mkdir -p "$work"/{data,runs,logs,done,probe}
# One compilation cache for the probes and every run: runs of the same observation and action sizes
# (navigate and stitch of one maze, say) compile their update once (MQE: ~100 s on an H100 machine).
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}
log() { echo "$(date +%T) $*" | tee -a "$work/logs/sweep.log"; }
cores=$(nproc)
runs=${#run_of[@]}
declare -A probe_entry  # agent set -> its first entry (none with STEPS)
for entry in "${entries[@]}"; do
    agents=${entry##*:}
    [[ -n "$fixed_steps" || -n "${probe_entry[$agents]:-}" ]] || probe_entry[$agents]=$entry
done
eval_workers=${EVAL_WORKERS:-$(PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" $python -c "from sweep_plan import evaluation_workers as w; print(w($cores, $runs))")}
datasets=($(for entry in "${entries[@]}"; do echo "${entry%%:*}"; done | awk '!seen[$0]++'))
# The probes start once all the datasets they train on exist. Datasets no probe trains on are still
# being generated while the probes run: then leave each probe process 3 cores (the update's dispatch
# and mqe-train's 2 batch-sampling threads) and one spare, or they are starved and the updates per
# second come out low (the first sweep's probe, beside generation on every core, measured a third
# of what its runs then did). When every dataset has a probe, generation has all the cores.
probe_processes=$(for agents in "${!probe_entry[@]}"; do tr '+' '\n' <<<"$agents"; done | wc -l)
probe_datasets=$(for entry in "${probe_entry[@]}"; do echo "${entry%%:*}"; done | sort -u)
free=$cores
if [[ $probe_processes -gt 0 ]]; then
    for name in "${datasets[@]}"; do
        grep -qxF "$name" <<<"$probe_datasets" || free=$(( cores - 3 * probe_processes - 1 ))
    done
fi
# The cores go to the datasets by their cost, so that they finish together: a manipulation
# transition costs ~5 pointmaze ones (290 vs 1340 transitions/s per worker on the first sweep's
# machine), and the datasets are about the same size.
cost() { [[ $1 == pointmaze* ]] && echo 1 || echo 5; }
total_cost=0
for name in "${datasets[@]}"; do total_cost=$(( total_cost + $(cost "$name") )); done

declare -A gen_pid
workers_log=()
for name in "${datasets[@]}"; do
    workers=$(( free * $(cost "$name") / total_cost > 1 ? free * $(cost "$name") / total_cost : 1 ))
    $python -m mqe_model.ogbench data "$name" --out-dir "$work/data" --workers "$workers" --no-progress \
        ${EXTRA_DATA_ARGS:-} >"$work/logs/data-$name.log" 2>&1 &
    gen_pid[$name]=$!
    workers_log+=("$name=$workers")
done
log "generating ${#datasets[@]} dataset(s) with workers ${workers_log[*]}; $runs run(s) will have" \
    "$eval_workers evaluation worker(s) each"
data_file() { ls "$work/data/$1"*.npz | grep -v -- '-val\.npz$' | head -1; }
generated() {  # wait for a dataset's generation (once; later calls return at once)
    if [[ -n "${gen_pid[$1]:-}" ]]; then
        wait "${gen_pid[$1]}" || { log "generation of $1 failed: $work/logs/data-$1.log"; exit 1; }
        gen_pid[$1]=""
    fi
}

# Probes: each set of agents on its first entry's GPU and data, once the data of every probe exists.
if [[ -z "$fixed_steps" ]]; then
    for name in $probe_datasets; do generated "$name"; done
    probe_pids=()
    probe_runs=()  # "set/agent"
    for agents in "${!probe_entry[@]}"; do
        IFS=: read -r name gpu _ <<<"${probe_entry[$agents]}"
        for agent in $(tr '+' ' ' <<<"$agents"); do
            CUDA_VISIBLE_DEVICES=$gpu XLA_PYTHON_CLIENT_MEM_FRACTION=$(memory "$gpu") $python -m mqe_model.train --agent "$agent" \
                --preset "$preset" --data "$(data_file "$name")" --workdir "$work/probe/$agents/$agent" --overwrite \
                --steps 10000000 --num-seeds "$seeds" --log-every 100 --save-every 10000000 --no-progress \
                >"$work/logs/probe-$agents-$agent.log" 2>&1 &
            probe_pids+=($!)
            probe_runs+=("$agents/$agent")
        done
    done
    last_step() { tail -n 1 "$work/probe/$1/metrics.jsonl" 2>/dev/null | $python -c "import json,sys; print(json.loads(sys.stdin.read() or '{\"step\": -1}')['step'])"; }
    for _ in $(seq 300); do  # every probe logging: all compiled and sharing their GPUs
        ready=1
        for run in "${probe_runs[@]}"; do [[ $(last_step "$run") -ge 0 ]] || ready=0; done
        [[ $ready == 1 ]] && break
        sleep 1
    done
    declare -A before
    for run in "${probe_runs[@]}"; do before[$run]=$(last_step "$run"); done
    t0=$(date +%s.%N); sleep "$probe_seconds"; t1=$(date +%s.%N)
    rates=()
    for run in "${probe_runs[@]}"; do
        rates+=("$run=$($python -c "print(($(last_step "$run") - ${before[$run]}) / ($t1 - $t0))")")
    done
    kill "${probe_pids[@]}" 2>/dev/null || true
    wait "${probe_pids[@]}" 2>/dev/null || true
    log "probes, $seeds seeds per run, agents of a set sharing one GPU: ${rates[*]} updates/s"
fi

for name in "${datasets[@]}"; do generated "$name"; done
log "data ready"

if [[ -n "$fixed_steps" ]]; then
    budget=(--steps "$fixed_steps")
else
    budget=(--rates "${rates[*]}" --safety "$safety" --unit "$unit")
fi
plan=$($python "$here/sweep_plan.py" "$work" "${entries[@]}" --seeds "$seeds" --preset "$preset" "${budget[@]}")
seed_list=$(seq -s ' ' 0 $((seeds - 1)))
run_dir=$($python -c "from mqe_model.ogbench.reproduce import run_name; print(run_name(list(range($seeds))))")
while read -r name gpu agents steps every start; do
    for agent in $(tr '+' ' ' <<<"$agents"); do
        log "start $name $agent on GPU $gpu: $steps updates, evaluations every $every from $start"
        # A maze MQE run also gets its critic's distances against the maze's shortest paths, from the
        # final checkpoint, which the pack leaves behind (on the CPU: the GPU may still be busy).
        distances=""
        if [[ $agent == mqe && ( $name == pointmaze* || $name == antmaze* ) ]]; then
            distances="JAX_PLATFORMS=cpu $python $here/distances.py --env $name \
                --workdir '$work/runs/$name/mqe/$run_dir' --out '$work/runs/$name/mqe-distances.json' \
                >'$work/logs/$name-mqe-distances.log' 2>&1;"
        fi
        CUDA_VISIBLE_DEVICES=$gpu XLA_PYTHON_CLIENT_MEM_FRACTION=$(memory "$gpu") setsid bash -c \
            "$python -m mqe_model.ogbench train $name --agent $agent --preset $preset --seeds $seed_list \
             --vmap-seeds --steps $steps --eval-every $every --eval-start $start --eval-workers $eval_workers \
             --data $(data_file "$name") --runs-dir '$work/runs' --no-progress ${EXTRA_REPRO_ARGS:-}; \
             status=\$?; $distances echo \$status >'$work/done/$name-$agent'" >"$work/logs/$name-$agent.log" 2>&1 </dev/null &
    done
done <<<"$plan"
log "all runs started; rows in $work/runs/<dataset>/<agent>.json"
