#!/usr/bin/env bash
# The whole GPU check, in one script, for the lent H200 (see scripts/gpu/README.md).
#
#   bash scripts/gpu-check.sh [STAGE...]       STAGE: see the stage_* functions below (default: the issue-11/12/15 set)
#   bash scripts/gpu-check.sh 'overhead|prices' tests   a|b: two stages side by side, one per GPU (a 2-GPU machine)
#   bash scripts/gpu-check.sh 'tests&verify&stacks'     a&b: side by side on one GPU (checks whose timings do not matter)
#
# Run from the repository root on the GPU machine, after the wheels staged by
# scripts/gpu/stage-wheels.sh (and scripts/gpu/stage-stack-wheels.sh for rsl_rl) have been carried
# (.gpu1/.gpu2 in two earlier calls; .gpu3 and .gpu4 in this one). Each stage writes under
# $OUT/<stage>/ and everything is packed into $OUT/gpu-results.tgz (the device tool returns at most 8
# files). Stages are independent: a failing one is reported and the next runs.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/perfkit-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$root${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/perfkit-bin:$PATH
# a multi-GPU machine here must keep NVLink multicast off (it can take the host's GPUs out of service)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

stage_setup() {
  bash scripts/gpu/install-on-gpu.sh
  [ -d /tmp/site/warp ] || { echo "warp not installed: carry .gpu1, .gpu2, .gpu3 first"; return 1; }
  if [ -d .gpu4 ]; then  # rsl-rl-lib and the pure-Python packages it needs beyond the image's
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu4/*.whl || return 1
  fi
  # byte-compile what the wheels were installed without (--no-compile) and this tree, as a pip install
  # would: otherwise every fresh process compiles warp, mujoco_warp, rsl_rl and perfkit from source, a
  # start-up of seconds that both arms of an overhead run pay and that spreads their walls
  python3 -m compileall -q -j 8 /tmp/site "$root/perfkit" "$root/examples" "$root/scripts" > /dev/null 2>&1 || true
  # `perfkit` on PATH without installing (the machine has no network for build deps)
  mkdir -p /tmp/perfkit-bin
  printf '#!/bin/sh\nexec python3 -m perfkit "$@"\n' > /tmp/perfkit-bin/perfkit
  chmod +x /tmp/perfkit-bin/perfkit
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 - <<'PY'
import torch, warp, mujoco, mujoco_warp
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
print("warp", warp.config.version, "mujoco", mujoco.__version__, "mujoco_warp", getattr(mujoco_warp, "__version__", "?"))
PY
  # compile and cache the ant's Warp kernels once (~60 s), before stages run side by side
  timeout 300 python3 examples/train.py --num-envs 64 --iterations 2 --num-steps 4 --backend mjwarp | tail -1
}

stage_tests() {
  # -p perfkit.pytest_plugin: the pytest11 entry point is not registered without a pip install
  # GPU_TESTS narrows the run (e.g. to the files a change touched); default: every gpu-marked test
  timeout "${STAGE_TIMEOUT:-540}" python3 -m pytest -q -m gpu -p perfkit.pytest_plugin ${GPU_TESTS:-tests} 2>&1 | tee "$OUT/tests/pytest-gpu.txt"
}

run_script() {  # run_script STAGE script.py [args...]
  local stage=$1; shift
  if [ -f "$1" ]; then
    timeout "${STAGE_TIMEOUT:-540}" python3 "$@" --out "$OUT/$stage" 2>&1 | tee -a "$OUT/$stage/log.txt"
  else
    echo "skip: $1 not in this tree"
  fi
}

stage_profile() { run_script profile scripts/gpu/profile_check.py --skip-tests; }  # stage tests runs tests/profile/test_gpu.py
stage_env()     { run_script env scripts/gpu/env_bench.py; }
stage_train()   { run_script train scripts/gpu/train_curve.py; }
stage_probes()  { run_script probes scripts/gpu/probe_validate.py; }
stage_sweeps()  { run_script sweeps scripts/gpu/sweeps.py --train; }  # + train.py vs train_naive.py report
stage_verify()  { run_script verify scripts/gpu/verify.py --stacks; }  # --verify on both examples (256, 4096 envs) and rsl_rl's loops
stage_startup() {  # train.py's start under py-spy, plain vs perfkit (the +2.3 / +4.5 s before its first line); carry .gpu5
  # --upgrade: /tmp/site/bin exists already (other wheels' scripts), and pip leaves it alone without it
  [ -x /tmp/site/bin/py-spy ] || python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .gpu5/py_spy-*.whl
  run_script startup scripts/gpu/startup.py ${STARTUP_ARGS:-}
}
stage_gated()   { run_script gated scripts/gpu/gated_counts.py; }     # a default (gated) run's syncs per site against --verify's runtime counts
stage_sync_ops() { run_script sync_ops probes/sync_ops.py; }          # runtime syncs per op class vs perfkit's count
stage_sync_sources() {  # the manager env's rollout, one process: plain vs perfkit with its parts off one at a time (by cause)
  timeout "${STAGE_TIMEOUT:-540}" python3 benchmarks/overhead.py --env manager --num-envs 4096 --device cuda \
    --rounds "${ROUNDS:-5}" --steps 96 --variants hooks auto auto-nosample auto-untimed hooks-untimed \
    --json "$OUT/sync_sources/result.json" 2>&1 \
    | tee "$OUT/sync_sources/log.txt"
}
stage_causes() {  # the manager env: py-spy on whole runs (plain / perfkit) and the rollout by cause in one process
  timeout "${STAGE_TIMEOUT:-540}" python3 scripts/gpu/pyspy_causes.py --out "$OUT/causes/pyspy" --rounds "${PYSPY_ROUNDS:-2}" 2>&1 \
    | tee "$OUT/causes/log.txt"
  timeout "${STAGE_TIMEOUT:-540}" python3 benchmarks/overhead.py --env manager --num-envs 4096 --device cuda \
    --rounds "${ROUNDS:-6}" --steps 48 --variants plain-again warn-only auto auto-nosample auto-untimed hooks-untimed \
    --json "$OUT/causes/sources.json" 2>&1 | tee -a "$OUT/causes/log.txt"
}
stage_onoff() { run_script onoff scripts/gpu/onoff.py > /dev/null; }  # the manager env in one process: plain/warn, then a session counting/paused, iteration by iteration
stage_tdto() { run_script tdto scripts/gpu/tensordict_to.py; }  # TensorDict.to() of on-device data, plainly and in a session (py-spy's 3.4 ms/step line)
stage_arms() { run_script arms scripts/gpu/overhead_arms.py --rounds "${ROUNDS:-2}"; }  # the manager env's whole run, perfkit's parts off in turn (+ GC in the timed window)
stage_stacks()  { run_script stacks scripts/gpu/stacks.py --wheels .gpu4 --skip-overhead; }  # the manager env through rsl_rl, 4096 envs
stage_overhead() { run_script overhead scripts/gpu/overhead.py --parts train; }   # train.py 256/4096: plain vs perfkit vs torch.profiler
stage_overhead_manager() { run_script overhead_manager scripts/gpu/overhead.py --parts manager,env-only --wheels .gpu4; }
stage_prices()  { run_script prices scripts/gpu/price_validate.py ${PRICE_ARGS:---sizes 512 --budget-s 500 --iterations 6}; }  # predicted vs measured gain of each fix at the plant scale (PRICE_ARGS replaces these: e.g. --sizes 4096)
stage_dist()    { run_script dist scripts/gpu/dist.py --rounds 3 ${DIST_ARGS:-}; }  # the data-parallel example on 2 GPUs (DIST_ARGS=--same-gpu on one)

run_stage() {  # run_stage NAME: one stage, timed, its failure reported
  local s=$1
  mkdir -p "$OUT/$s"
  echo "=== stage $s ($(date +%T))"
  local t0=$(date +%s)
  if ! "stage_$s"; then echo "!!! stage $s failed"; return 1; fi
  echo "=== stage $s took $(( $(date +%s) - t0 )) s"
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(setup tests verify stacks overhead overhead_manager prices dist)
status=0
for s in "${stages[@]}"; do
  if [[ $s == *"&"* ]]; then  # stages side by side on the same GPU (checks whose timings do not matter)
    pids=()
    IFS='&' read -ra group <<< "$s"
    for g in "${group[@]}"; do
      (run_stage "$g" > "$OUT/$g.console.txt" 2>&1) & pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    for g in "${group[@]}"; do tail -n 25 "$OUT/$g.console.txt"; done
  elif [[ $s == *"|"* ]]; then  # two stages side by side, the first on GPU 0, the second on GPU 1
    a=${s%%|*}; b=${s#*|}
    (CUDA_VISIBLE_DEVICES=0 run_stage "$a" > "$OUT/$a.console.txt" 2>&1) & pa=$!
    (CUDA_VISIBLE_DEVICES=1 run_stage "$b" > "$OUT/$b.console.txt" 2>&1) & pb=$!
    wait $pa || status=1
    wait $pb || status=1
    tail -n 40 "$OUT/$a.console.txt" "$OUT/$b.console.txt"
  else
    run_stage "$s" || status=1
  fi
done
(cd "$OUT" && tar czf gpu-results.tgz --exclude=gpu-results.tgz . ) && ls -la "$OUT"
exit $status
