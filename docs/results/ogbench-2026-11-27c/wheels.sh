#!/bin/bash
# How this lease's Python packages reached the offline device machine (Python 3.12, JAX 0.11.2 and
# numpy, scipy, pillow preinstalled there): wheels downloaded here, in two sets that each fit a
# device call beside the repository (64 MiB per call), installed into /tmp/site by setup.sh.
set -euo pipefail
p="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
   --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform manylinux1_x86_64 --platform any"
all=$(mktemp -d)
python3 -m pip download -q $p -d "$all" flax optax orbax-checkpoint tyro tqdm ogbench "mujoco==3.2.7" \
    "dm_control==1.0.27" "jax==0.11.2" "numpy==2.5.2"
# dm_control without its locomotion, suite and blender assets (OGBench needs mjcf and viewer only):
# 55 MB -> 5 MB. RECORD is rewritten to match.
dmc=$(mktemp -d); (cd "$dmc" && unzip -q "$all"/dm_control-*.whl && rm -rf dm_control/{locomotion,suite,blender} && python3 - <<'PY'
import base64, hashlib, os, zipfile
files = [os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk(".") for f in fs]
record = next(f for f in files if f.endswith(".dist-info/RECORD"))
lines = [f"{f},sha256={base64.urlsafe_b64encode(hashlib.sha256(open(f, 'rb').read()).digest()).rstrip(b'=').decode()},{os.path.getsize(f)}"
         for f in files if f != record]
open(record, "w").write("\n".join(lines + [f"{record},,"]) + "\n")
with zipfile.ZipFile("/tmp/dm_control-1.0.27-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for f in files:
        z.write(f, f)
PY
)
rm -f "$all"/dm_control-*.whl && mv /tmp/dm_control-1.0.27-py3-none-any.whl "$all"/
# Already on the device (or not needed for state-based runs: opencv, uvloop, labmaze):
(cd "$all" && rm -f jax-* jaxlib-* numpy-* ml_dtypes-* opt_einsum-* scipy-* pillow-* opencv* setuptools-* \
    requests-* urllib3-* idna-* certifi-* charset_normalizer-* typing_extensions-* packaging-* uvloop-* labmaze-*)
mkdir -p .whl .whl2   # .whl2: data generation (call 1); .whl: the JAX side (call 2)
for name in ogbench mujoco dm_control lxml pyopengl glfw gymnasium imageio farama cloudpickle dm_env dm_tree \
            absl pyparsing tyro docstring_parser typeguard rich pygments markdown_it_py mdurl tqdm; do
    mv "$all"/${name}[-_]*.whl .whl2/ 2>/dev/null || true
done
mv "$all"/*.whl .whl/
du -sh .whl .whl2
