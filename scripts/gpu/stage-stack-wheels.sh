#!/usr/bin/env bash
# Stage the wheels scripts/gpu/stacks.py needs on the lent H200 and that its image lacks: rsl-rl-lib
# and its pure-Python requirements, for the machine's Python 3.12 (x86-64), into a folder of this
# checkout that git ignores (default .gpu4/), small enough to carry with the GPU check's .gpu3.
#
#   bash scripts/gpu/stage-stack-wheels.sh [DIR]
#
# rsl-rl-lib 5.5.1 requires GitPython, numpy, onnx, onnxscript, tensorboard, tensordict and torch.
# Already on the lent GPU machine's image (its package list): numpy,
# onnx, onnxscript, tensorboard, torch 2.11, cloudpickle, packaging, typing-extensions. Missing:
#   rsl-rl-lib 5.5.1                 py3-none-any
#   tensordict 0.15.3                py3-none-any: no compiled part (0.14 and older ship tensordict/_C.so,
#                                    built against one torch); it requires torch>=2.11.0a0, which the
#                                    image's torch 2.11 meets
#   pyvers 0.2.3                     tensordict's requirement (pyvers<0.3,>=0.2)
#   GitPython 3.2.1, gitdb 4.0.12, smmap 5.0.3   rsl_rl's logger imports git (stacks.py sets
#                                    GIT_PYTHON_REFRESH=quiet: the image may have no git executable)
# On the GPU machine, stacks.py installs them into /tmp/site-stacks itself (--wheels .gpu4).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
dir=${1:-.gpu4}
case "$dir" in /*|..*) echo "stage-stack-wheels: DIR must be a folder inside the checkout, got $dir" >&2; exit 2 ;; esac
if ! git check-ignore -q "$dir/x.whl"; then
  exclude=$(git rev-parse --git-path info/exclude)
  echo "/${dir%/}/" >> "$exclude"
  echo "stage-stack-wheels: added /${dir%/}/ to $exclude (git must ignore it: untracked files travel to the GPU)"
fi
rm -rf "$dir"
mkdir -p "$dir"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dir" \
  rsl-rl-lib==5.5.1 tensordict==0.15.3 pyvers==0.2.3 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3 \
  gymnasium==1.4.0 farama-notifications==0.0.4 cloudpickle==3.1.2
n=$(ls "$dir"/*.whl | wc -l)
[ "$n" -eq 9 ] || { echo "stage-stack-wheels: expected 9 wheels in $dir, got $n" >&2; exit 1; }
if unzip -l "$dir"/tensordict-*.whl | grep -q '\.so$'; then
  echo "stage-stack-wheels: the tensordict wheel has compiled parts (tied to one torch); expected a pure one" >&2
  exit 1
fi
kb=$(du -sk "$dir" | cut -f1)
[ "$kb" -lt 61440 ] || { echo "stage-stack-wheels: $dir is ${kb} KiB, over the ~60 MB budget" >&2; exit 1; }
git check-ignore -q "$dir/x.whl" || { echo "stage-stack-wheels: git does not ignore $dir" >&2; exit 1; }
ls -1 "$dir"
echo "staged ${kb} KiB in $dir; carry it with the GPU check's .gpu3 call: carry=[\".gpu3\", \"$dir\"], then"
echo "  bash .gpu3/install-on-gpu.sh && python3 scripts/gpu/stacks.py --out \$OUT/stacks --wheels $dir"
