#!/usr/bin/env bash
# Stage the GPU machine's missing Python packages (warp-lang, mujoco, mujoco-warp, nvtx) as wheels
# for its Python 3.12, in folders of this checkout that git ignores, each small enough to carry in one
# call (the carried tree is limited to 64 MiB a call, and warp-lang's wheel alone is ~149 MB).
#
# Run from anywhere in the checkout:  bash scripts/gpu/stage-wheels.sh
# The project tree travels too: keep it under ~10 MiB or the calls go over the limit.
# Then see scripts/gpu/README.md for the three calls that carry and install them.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
for d in .gpu1 .gpu2 .gpu3; do
  rm -rf "$d"; mkdir -p "$d"  # ignored by .gitignore
done
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$tmp" \
  "warp-lang==${WARP_VERSION:-1.19.0}" "mujoco==${MUJOCO_VERSION:-4.0.0}" "mujoco-core==${MUJOCO_VERSION:-4.0.0}" \
  "mujoco-warp==${MUJOCO_WARP_VERSION:-4.0.0}" nvtx glfw
split -b 50m "$tmp"/warp_lang-*.whl "$tmp/warp.part."
mv "$tmp/warp.part.aa" .gpu1/
mv "$tmp/warp.part.ab" .gpu2/
mv "$tmp"/warp.part.a[c-z] .gpu3/
mv "$tmp"/mujoco_warp-*.whl "$tmp"/mujoco-[0-9]*.whl "$tmp"/glfw*.whl .gpu1/
mv "$tmp"/nvtx*.whl .gpu2/
mv "$tmp"/mujoco_core-*.whl .gpu3/
rm -rf "$tmp"
du -sh .gpu1 .gpu2 .gpu3
echo "staged; each folder must travel in its own call (see scripts/gpu/README.md)"
