#!/bin/bash
# profile2.sh: issue 2's profile (carry .whl; after clocks6.sh in the same call, which installs the wheels).
# Kernel rows, launches, and the new device span and busy share per update, for 1 and 8 vmapped seeds.
[ -d /tmp/site/jax ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
for seeds in 1 8; do
  timeout 120 python3 -m benchmarks.profile_train_step --seeds $seeds --top 15 2>&1 | grep -v -i warning \
    | tee $OUT/profile_train_step-seeds$seeds.txt
done
