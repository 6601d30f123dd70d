#!/bin/bash
# cstates6.sh: issue 6 (carry .whl .whl3). Is a lone robot's slower act the host's idle states? The GPU's
# clocks stay up between paced acts and its kernels take the same time (bench-2026-12-01e), so the wait is
# on the host: threads that sleep 200 ms between acts wake from the CPU's idle states (in a VM, a halted
# vCPU). Holding a PM QoS request of 0 us (/dev/cpu_dma_latency, open while the request lasts) keeps every
# core out of them. The stacked act with and without the request, interleaved twice.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/jax-cache
{ date +%T; lscpu | grep -i -E "model name|hypervisor|^cpu\(s\)"; ls -l /dev/cpu_dma_latency
  d=/sys/devices/system/cpu; echo "driver $(cat $d/cpuidle/current_driver) governor $(cat $d/cpuidle/current_governor_ro 2>/dev/null || cat $d/cpuidle/current_governor)"
  for s in $d/cpu0/cpuidle/state*; do echo "$(basename $s) $(cat $s/name) latency $(cat $s/latency) us, usage $(cat $s/usage)"; done
  cat $d/cpu0/cpufreq/scaling_governor 2>/dev/null; } 2>&1 | tee $OUT/host.txt
run() { timeout 100 python3 -m benchmarks.act_latency --preset bridge --runs 200 --paced-runs 25 --profile-calls 0 \
  --encoders stacked --phases 2>&1 | grep --line-buffered -v -i warning; }
for round in 1 2; do
  echo "== round $round, no request $(date +%T)" | tee -a $OUT/act_latency-qos.txt; run | tee -a $OUT/act_latency-qos.txt
  exec 3> /dev/cpu_dma_latency && printf '\x00\x00\x00\x00' >&3
  echo "== round $round, cpu_dma_latency 0 us held $(date +%T)" | tee -a $OUT/act_latency-qos.txt; run | tee -a $OUT/act_latency-qos.txt
  exec 3>&-
done
for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do echo "$(basename $s) usage $(cat $s/usage)"; done | tee -a $OUT/host.txt
