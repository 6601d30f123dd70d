#!/bin/bash
# The server's Python packages for a device call (.whl3, next to .whl from
# docs/results/ogbench-2026-11-27b/wheels.sh): what `python -m server` and the serving benchmarks need
# beyond the device image (Python 3.12; anyio, click, h11, idna and msgpack are there or in .whl).
set -euo pipefail
echo "/.whl3/" >> .git/info/exclude
d=$(mktemp -d)
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$d" fastapi uvicorn httptools tyro opentelemetry-api
rm -f "$d"/anyio-* "$d"/click-* "$d"/h11-* "$d"/idna-* "$d"/msgpack-*
mkdir -p .whl3 && cp "$d"/*.whl .whl3/ && du -sh .whl3
