#!/bin/bash
# diagnose.sh [RUNS_GLOB]: after a stitch lease's runs end (no carry). For each finished MQE run under
# /tmp/sweep (default: every runs*/.../mqe/seed* directory), the critic and actor diagnostics of
# ogbench.md section 19 on its latest checkpoint, run here because the params are too large to bring
# back: $OUT/diag.tgz (per run a folder of wall_leak.json/.png, local_choices.json and the task-5 map, and
# the tools' output; a call brings back 8 files at most), and a summary printed.
bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site:/tmp/repo JAX_PLATFORMS=cpu PYTHONUNBUFFERED=1
D=/tmp/repo/docs/results/ogbench-2026-11-29g/diagnostics; mkdir -p /tmp/diag
for run in ${1:-/tmp/sweep/runs*/*/*/mqe/seed* /tmp/sweep/runs*/*/mqe/seed*}; do
  [ -d $run/checkpoints ] || continue
  name=$(echo ${run#/tmp/sweep/} | sed "s|/|-|g")
  for tool in wall_leak local_choices; do
    python3 $D/$tool.py $run /tmp/diag/$name > /tmp/diag/$name-$tool.txt 2>&1 || { echo "$name $tool failed:"; tail -3 /tmp/diag/$name-$tool.txt; }
  done
  echo "== $name"; grep -E "^(all|direct|detour) +1-60|^walks|^task|pooled" /tmp/diag/$name-*.txt | cut -d: -f2- | cut -c1-220
done
tar czf $OUT/diag.tgz -C /tmp diag
