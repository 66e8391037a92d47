#!/usr/bin/env bash
# On the GPU machine, from the repository root: gather the carried wheel parts (.gpu1, .gpu2, .gpu3,
# made by scripts/gpu/stage-wheels.sh) in /tmp/perfkit-wheels; once all are there, install them into
# /tmp/site. Then `export PYTHONPATH=/tmp/site:$PWD`. Safe to run in every call: it installs once.
set -e
mkdir -p /tmp/perfkit-wheels
for d in .gpu1 .gpu2 .gpu3; do [ -d "$d" ] && cp -n "$d"/* /tmp/perfkit-wheels/ 2>/dev/null || true; done
cd /tmp/perfkit-wheels
if [ ! -d /tmp/site/warp ] && ls warp.part.ac mujoco_core-*.whl nvtx-*.whl mujoco_warp-*.whl >/dev/null 2>&1; then
  cat warp.part.* > warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ./*.whl
  echo "installed into /tmp/site"
fi
[ -d /tmp/site/warp ] && echo "warp ready: export PYTHONPATH=/tmp/site" || echo "parts so far: $(ls | tr '\n' ' ')"
