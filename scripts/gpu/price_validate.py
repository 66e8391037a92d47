#!/usr/bin/env python3
"""On the H200: validate the what-if prices against the measured gain of removing each planted
anti-pattern of ``examples/train_naive.py``, one at a time, at 256 and 4096 envs (issue 12).

    python3 scripts/gpu/price_validate.py --out DIR [--sizes 512,4096] [--budget-s 330] [--plant-scale K[,NAME=K...]]

``--budget-s`` bounds the profiling and the measuring rounds: rounds stop when the next would pass
it, after at least ``--min-rounds``. On the H200 at 512 envs (reports/h200-2026-12-02-s14) a profile
takes 18-28 s and, in-process, a round of the 7 groups (a process each, ``--iterations 6``) 100-117 s:
``--budget-s 500`` made three rounds after the 7 profiles, 440 two. With ``--no-in-process`` a run of
one arm took 8-19 s (reports/h200-2026-12-02-s12; most of it start-up), 14 runs a round. Each size as
much again.

**Arms.** ``train_naive.py`` plants seven anti-patterns, each on its line marked ``# ANTI-PATTERN
NAME`` inside an ``if``/``else`` whose other branch is the fix, and removes any with ``--fix NAME``.
The per-env loop (``env_loop``) dominates the all-planted step and would hide every other fix in its
noise, so there are two baselines per size: ``none`` (all planted), against which ``env_loop`` is
measured, and ``env_loop`` (the loop fixed, ``--base-fix``), against which each other fix is
measured (arm ``env_loop+NAME``). Arms with the loop still planted are slow (tens of ms per step at
4096 envs) and run ``--slow-iterations`` in the first ``--slow-rounds`` rounds only (their effect is
large); the others run ``--iterations`` every round.

**Plant scale.** At scale 1 each planted sync or allocation costs 0.01-0.35 ms of a ~5 ms step, below
the run-to-run noise (2.5-8 % on the H200, ``reports/price-validation-h200``). The runs and profiled
baselines of those fixes therefore get ``--plant-scale`` (default ``PLANT_SCALE``): ``train_naive.py``
repeats each planted anti-pattern but the per-env loop that many times a step, each extra sync after
a slice of device work that its fix does too (the script's docstring). The scale is in the report.

**Isolated groups** (``--isolate``, the default). The noise is relative (SD of ``log T``), and in one
group every planted effect adds to the shared baseline: with six effects of size ``E`` on a step
``T0``, each is ``E / (T0 + 6E + the shared work) < 1/6`` of the baseline, so no scale brings each
above five noise SDs where the noise is above ~3 %. So each fix but ``--base-fix`` has its own group
of two arms, ``BASE@NAME`` (the base fixes applied, only NAME at the plant scale, the other
anti-patterns planted as written) and ``BASE+NAME@NAME``, with its own profiled baseline; the loop's
group (``none`` against ``env_loop``) runs at scale 1; the run-to-run noise of all groups of a size is
pooled (their residual sums of squares added). ``--no-isolate``: the two groups above, every arm at
the plant scale. The table gives each effect in noise SDs (*x noise*).

**Predicted** saving of a fix: each baseline is profiled once by ``perfkit profile`` (warm-up: the
first iteration, as the script's own SPS leaves it out); the findings of the fix are those on the
lines of the marked ``if``/``else`` branch (a marked per-env loop brings its body); the predicted
saving is what the what-if claims for fixing exactly those findings, ``T - T_after``
(:func:`perfkit.pricing.cost.predict`: bounded by segment times, floored at the untouched time).
The model that prices most of it names the case's kind (``loop``, ``alloc``, ``sync_wait``). The
sync models are also tried on the same record without the measured waits (``backlog_split``) and
without GPU timing (``round_trip``, what a CPU-only machine predicts with the reference prices).

**Measured** saving: plain runs of the script (no profiler), a fresh process per group and round,
all groups of a size in one schedule per round (their order shuffled each round, seeded). In-process
A/B (``--in-process``, the default): the process runs both arms of its group, ``train_naive.py
--ab-fix``: the baseline's fixes in iterations A, the arm's fix too in iterations B, alternating
A B B A after a warm-up iteration each, and prints ``SPS[A]``/``SPS[B]``, env steps per second over
each arm's steady iterations (rollout and update; ``--iterations`` less one per arm). The H200's
host drifts by 5-30 % between runs seconds apart (reports/h200-2026-12-02-s12/prices: a whole round
slower, one fixed arm 13.4 then 10.2 ms), which separate processes carry into the arms' difference
(7.7 % noise there); iterations a third of a second apart share the drift. ``--no-in-process``: a
process per arm printing ``SPS: <float>`` over its steady iterations (the first left out). Either
way an arm's mean step time is ``T = num_envs * 1000 / SPS`` ms, the same mean the cost model uses.
A fresh process first imports torch, Warp and MuJoCo Warp and waits; it is released when the
previous run ends, so its imports overlap that run (``--no-preload``: plain ``python3 script``). Per
group (a baseline and its arm) the rounds are blocks of a two-way model of ``log T`` (arm + round:
drifts between rounds cancel): the pooled residual SD is the run-to-run noise (in-process: of the
arms' difference); an arm's saving ``T_base * (1 - exp(-d))`` (``d``: the mean log difference) has
a 95 % interval from ``t(dof) * sigma * sqrt(2 / rounds)``. A case is *judged* only when that interval
excludes zero (the noise is below the effect); it agrees when ``|predicted - measured| <= 30 %`` of
the measured saving.

**Models.** A pricing model is *validated* when every judged case it priced agrees (and one was
judged), else *unvalidated* with its worst error, or "effect below noise" when none was judged.

Writes after every run (a timeout still leaves results): ``DIR/price-validation.md`` (the tables),
``DIR/price-validation-results.json`` (everything: runs, cases, noise), ``DIR/price-validation.json``
(``perfkit.price-validation/1``: commit it as ``perfkit/data/price-validation.json``, which the cost
model reads to label each price), ``DIR/profiles/*.json`` (the profiled baselines).

Exit status: 0 when every run ran (whatever the agreement), 1 when a run failed or the script is
missing. On the CPU (``--backend mujoco``, tiny sizes) the same path runs in the test suite.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfkit.collectors.loops import is_per_env  # noqa: E402
from perfkit.pricing.cost import loop_body_findings, predict, price_run  # noqa: E402
from perfkit.pricing.machine_profile import (  # noqa: E402
    VALIDATION_SCHEMA,
    ProfileError,
    cache_path,
    check_validation,
    load_profile,
    read_profile,
    reference_profile,
)
from perfkit.record import EXTRA_SYNC_WAIT, Finding, Run  # noqa: E402

NAIVE = ROOT / "examples" / "train_naive.py"
FIXES = ("item_log", "nonzero_reset", "env_loop", "fresh_tensors", "print_tensor", "cpu_numpy", "list_gather")
SLOW = "env_loop"  # an arm with this anti-pattern still planted runs --slow-iterations
UNSCALED = ("env_loop",)  # train_naive.py's --plant-scale scales every other anti-pattern
# train_naive.py --plant-scale (the module doc, "Plant scale"): at 256 envs on the H200 one repetition
# of a planted sync saves ~20-40 us (its round trip and copy, less the fix's one launch) for ~40-75 us of
# step, fresh_tensors' ~25 us (two launches, three allocations) for ~32 us, a printed tensor ~0.25 ms once
# an iteration of 32 steps: x96 (x320 prints, 10 a step) made each isolated effect ~2-4 ms on a ~8-13 ms
# step; at 6.1 % pooled noise (reports/price-validation-h200, 256 envs) that was 4.2x / 4.4x / 2.5x the noise
# for item_log / list_gather / cpu_numpy and 5.9-7.9x for the rest. So the table is made at 512 envs
# (`--sizes 512`, scripts/gpu-check.sh's prices stage) with x200: reports/h200-2026-12-02-s12 (pooled noise
# 7.7 %) read 8.8-10.1x for env_loop / nonzero_reset / print_tensor, 5.3x list_gather, 4.8x fresh_tensors,
# 3.2x item_log and cpu_numpy. Per repetition there the fix's own work cost ~8 us (fresh_tensors: one
# add_), ~30-34 us (item_log, cpu_numpy, list_gather: a slice of device work the fix does too) against
# a saving of ~17 us (item_log, cpu_numpy, fresh_tensors) or ~31 us (list_gather), on a ~5.5 ms rest of
# the step. The effect in noise SDs is log(1 + E / T_fix) / sigma with both E and T_fix growing with the
# scale: x280 / x300 lift fresh_tensors / list_gather to ~6x; item_log and cpu_numpy approach
# log(1 + 17/30) / 0.077 = 5.8x only as the scale grows without bound (x480: ~4.3x), so their scale
# stays: what would lift them is a lighter slice (a better saving-to-work ratio) or a lower noise, not
# more of the same repetition. Most of that noise was the host drifting between processes, which
# in-process A/B (--in-process, the module doc's "Measured") takes out of the arms' difference: with it,
# reports/h200-2026-12-02-s14 read 2.8-3.3 % noise and every effect 6.2-27x at this scale. A fixed
# repetition count is not a per-env loop unless it is a fraction of the env count (check_scale, perfkit's
# own rule).
PLANT_SCALE = "200,fresh_tensors=280,list_gather=300,print_tensor=320"
TOLERANCE = 0.30
SPS_RE = re.compile(r"^SPS:\s*([0-9.eE+-]+)\s*$", re.M)
AB_SPS_RE = re.compile(r"^SPS\[([AB])\]:\s*([0-9.eE+-]+)\s*$", re.M)  # train_naive.py --ab-fix
ANTI_RE = re.compile(r"#\s*ANTI-PATTERN\s+([a-z_]+)")
PRELOAD = ("torch", "numpy", "mujoco", "warp", "mujoco_warp", "perfkit.envs", "perfkit.envs.locomotion", "perfkit.rl")
VARIANTS = ("as_priced", "backlog_split", "round_trip")
RESULTS_SCHEMA = "perfkit.price-validation-results/1"
# two-sided 95 % Student t quantiles by degrees of freedom (no scipy on the GPU machine)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 22: 2.074, 24: 2.064, 26: 2.056, 28: 2.048, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[price_validate {time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:.0f}s] {msg}", flush=True)


def t975(dof: int) -> float:
    """The 97.5 % quantile of Student's t with ``dof`` degrees of freedom (table; the next lower
    tabulated dof in between, which errs wide)."""
    if dof < 1:
        return math.inf
    keys = [k for k in sorted(_T975) if k <= dof]
    return _T975[keys[-1]] if dof <= 120 else 1.960


# ---- arms ---------------------------------------------------------------------------------------------
def arm_name(fix: tuple[str, ...]) -> str:
    return "+".join(fix) if fix else "none"


def arm_fix(name: str) -> tuple[str, ...]:
    name = name.split("@")[0]
    return () if name == "none" else tuple(name.split("+"))


def arm_scaled(name: str) -> str | None:
    """The one anti-pattern an isolated arm (``FIXES@NAME``) runs at the plant scale; None: all of them."""
    return name.partition("@")[2] or None


def plan_groups(fixes: list[str], base_fix: tuple[str, ...], isolate: bool = False) -> list[dict[str, Any]]:
    """``[{"base": arm, "arms": {arm: the fix it adds}}]``: fixes in ``base_fix`` against all planted,
    the others against ``base_fix`` applied — together, or with ``isolate`` each in its own group
    (``"pooled": True``) whose two arms run only that anti-pattern at the plant scale (``@NAME``)."""
    groups = []
    first = {arm_name((f,)): f for f in fixes if f in base_fix}
    if first:
        groups.append({"base": "none", "arms": first})
    rest = {arm_name(tuple(base_fix) + (f,)): f for f in fixes if f not in base_fix}
    if isolate:  # every group pools its noise with the others of its size
        for g in groups:
            g["pooled"] = True
    if rest and isolate:
        base = arm_name(tuple(base_fix))
        groups += [{"base": f"{base}@{f}", "arms": {f"{arm}@{f}": f}, "pooled": True} for arm, f in rest.items()]
    elif rest:
        groups.append({"base": arm_name(tuple(base_fix)), "arms": rest})
    return groups


def schedule_arms(groups: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for g in groups:
        for a in [g["base"], *g["arms"]]:
            if a not in out:
                out.append(a)
    return out


# ---- attribution --------------------------------------------------------------------------------------
def planted_blocks(source: str) -> dict[str, set[int]]:
    """Anti-pattern name -> the lines it owns: the innermost ``if``/``else`` branch holding its
    ``# ANTI-PATTERN NAME`` marker (the other branch is its fix), else the marked line alone."""
    tree = ast.parse(source)
    branches = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            for body in (node.body, node.orelse):
                if body:
                    branches.append((body[0].lineno, max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in body)))
    out: dict[str, set[int]] = {}
    for no, line in enumerate(source.splitlines(), 1):
        for name in ANTI_RE.findall(line):
            inside = [b for b in branches if b[0] <= no <= b[1]]
            first, last = min(inside, key=lambda b: b[1] - b[0]) if inside else (no, no)
            out.setdefault(name, set()).update(range(first, last + 1))
    return out


def attribute(run: Run, script: Path) -> dict[str, list[Finding]]:
    """The findings of each anti-pattern: in ``script``, on its lines (a per-env loop brings its body)."""
    blocks = planted_blocks(script.read_text())
    out: dict[str, list[Finding]] = {}
    for name, lines in blocks.items():
        owned: list[Finding] = []
        for f in run.findings:
            if Path(f.path).name == script.name and f.line in lines:
                for g in [f, *(loop_body_findings(f, run) if f.kind == "loop" else [])]:
                    if all(g is not h for h in owned):
                        owned.append(g)
        if owned:
            out[name] = owned
    return out


# ---- predictions --------------------------------------------------------------------------------------
def variant_of(run: Run, variant: str) -> Run | None:
    """The record as profiled (``as_priced``), without the measured sync waits (``backlog_split``), or
    without GPU timing too (``round_trip``: what a CPU-only machine's record holds); None when the
    variant would price nothing differently (no waits, no GPU timing)."""
    has_waits = bool(run.extra.get(EXTRA_SYNC_WAIT))
    has_gpu = any(s.gpu_ms_per_step is not None for s in run.segments.values())
    if variant == "backlog_split" and not (has_waits and has_gpu):
        return None
    if variant == "round_trip" and not has_gpu:
        return None
    r = Run.from_dict(run.to_dict())
    if variant != "as_priced":
        r.extra.pop(EXTRA_SYNC_WAIT, None)
    if variant == "round_trip":
        for s in r.segments.values():
            s.gpu_ms_per_step = None
            for c in (s.children or {}).values():
                c.gpu_ms_per_step = None
    return r


def profile_used(run: Run) -> dict[str, Any] | None:
    """The machine cost profile the profiled run was priced with (the reference, or a cached probe
    profile named by its key), so that its variants are priced alike — found without asking this
    process's torch about the machine (no CUDA context here); None when it cannot be found."""
    pr = run.pricing.prices
    if str(pr.get("profile") or "").startswith("reference:"):
        return reference_profile()
    key = pr.get("profile_key")
    if key:
        try:
            return read_profile(cache_path(key))
        except ProfileError:
            return None
    return None


def predictions(run: Run, script: Path, fixes: list[str], profile: dict | None) -> dict[str, dict[str, Any]]:
    """Per fix, per variant: the what-if's predicted saving for fixing exactly the fix's findings."""
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        r = variant_of(run, variant)
        if r is None:
            continue
        r = price_run(r, profile)
        model_of = r.pricing.prices["model_of"]
        for fx, found in attribute(r, script).items():
            if fx not in fixes:
                continue
            priced = [f for f in found if f.est_ms_per_step is not None]
            p = predict(r, priced)
            by_model: dict[str, float] = {}
            for f in priced:
                m = model_of.get(f"{f.site} {f.op}", f.kind)
                by_model[m] = by_model.get(m, 0.0) + f.est_ms_per_step
            out.setdefault(fx, {})[variant] = {
                "saved_ms": p["step_ms"] - p["step_ms_after"] if p["step_ms"] else None,
                "model": max(by_model, key=by_model.get) if by_model else None,
                "by_model_ms": by_model, "bound": p["bound"], "step_ms_profiled": p["step_ms"],
                "findings": [f"{f.kind} {f.op} {f.site} x{f.per_step:g}/step ~{(f.est_ms_per_step or 0) * 1e3:.1f} us/step"
                             for f in found]}
    return out


# ---- measurement statistics ------------------------------------------------------------------------
def block_analysis(times: dict[str, list[float | None]], base: str,
                   pooled: tuple[float, int] | None = None) -> dict[str, Any]:
    """Two-way (arm x round) additive model of ``log T`` over the rounds every arm completed: the
    pooled residual SD (run-to-run noise, relative), and per arm its saving against ``base`` with a
    95 % interval. ``times``: arm -> step time (ms) per round, None where a run failed. ``pooled``:
    ``(sigma, dof)`` of several such groups together (:func:`pool`), used for the intervals instead."""
    arms = list(times)
    n = max((len(v) for v in times.values()), default=0)
    rounds = [r for r in range(n) if all(len(times[a]) > r and times[a][r] for a in arms)]
    k, a_n = len(rounds), len(arms)
    out: dict[str, Any] = {"rounds": k, "arms": {}, "sigma_rel": None, "dof": 0, "t": None}
    if k < 1 or base not in times:
        return out
    y = {a: [math.log(times[a][r]) for r in rounds] for a in arms}
    arm_mean = {a: sum(v) / k for a, v in y.items()}
    round_mean = [sum(y[a][i] for a in arms) / a_n for i in range(k)]
    grand = sum(arm_mean.values()) / a_n
    ss = sum((y[a][i] - arm_mean[a] - round_mean[i] + grand) ** 2 for a in arms for i in range(k))
    dof = (a_n - 1) * (k - 1)
    sigma = math.sqrt(ss / dof) if dof > 0 else None
    if pooled is not None and pooled[0] is not None and pooled[1] > 0:
        sigma, dof = pooled
    t = t975(dof) if dof > 0 else None
    out.update(sigma_rel=sigma, dof=dof, t=t)
    t_base = math.exp(arm_mean[base])
    for a in arms:
        d = arm_mean[base] - arm_mean[a]  # > 0: the arm is faster
        half = t * sigma * math.sqrt(2.0 / k) if sigma is not None else None
        e = {"step_ms": math.exp(arm_mean[a]), "step_ms_runs": [times[a][r] for r in rounds],
             "saved_ms": t_base * (1.0 - math.exp(-d)), "gain": math.exp(d) - 1.0}
        if half is not None:
            lo, hi = t_base * (1.0 - math.exp(-(d - half))), t_base * (1.0 - math.exp(-(d + half)))
            e.update(saved_lo_ms=lo, saved_hi_ms=hi, noise_ms=(hi - lo) / 2.0, judged=abs(d) > half,
                     effect_sd=abs(d) / sigma if sigma else None)
        else:
            e.update(saved_lo_ms=None, saved_hi_ms=None, noise_ms=None, judged=False, effect_sd=None)
        out["arms"][a] = e
    return out


def pool(blocks: list[dict[str, Any]]) -> tuple[float | None, int]:
    """``(sigma, dof)`` of several groups' residuals together: each group's own arm x round model,
    the residual sums of squares added (the same run-to-run noise assumed in each)."""
    dof = sum(b["dof"] for b in blocks if b.get("sigma_rel") is not None)
    ss = sum(b["sigma_rel"] ** 2 * b["dof"] for b in blocks if b.get("sigma_rel") is not None)
    return (math.sqrt(ss / dof) if dof > 0 else None), dof


def verdict(pred: float | None, meas: dict[str, Any] | None) -> tuple[str, float | None]:
    """(verdict, signed relative error) of a predicted saving against a measured one."""
    if pred is None:
        return "no prediction", None
    if not meas or meas.get("saved_ms") is None:
        return "not measured", None
    if not meas.get("judged"):
        return "below noise", None
    m = meas["saved_ms"]
    err = (pred - m) / abs(m)
    if m <= 0:
        return "measured slower", err
    if abs(err) <= TOLERANCE:
        return "within ±30%", err
    return ("over-predicted" if err > 0 else "under-predicted"), err


def model_status(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per pricing model: validated / unvalidated (worst error, or why), from the cases it priced."""
    per: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        for variant, p in (c.get("predicted") or {}).items():
            model = p.get("model")
            if model is None or (variant != "as_priced" and model != variant):
                continue  # a variant counts only for the sync model it exists to try
            v, err = verdict(p.get("saved_ms"), c.get("measured"))
            per.setdefault(model, []).append({"num_envs": c["num_envs"], "fix": c["fix"], "variant": variant,
                                              "predicted_ms": p.get("saved_ms"),
                                              "measured_ms": (c.get("measured") or {}).get("saved_ms"),
                                              "noise_ms": (c.get("measured") or {}).get("noise_ms"),
                                              "verdict": v, "error": err})
    out = {}
    for model, rows in sorted(per.items()):
        judged = [r for r in rows if r["error"] is not None]
        worst = max(judged, key=lambda r: abs(r["error"]))["error"] if judged else None
        ok = bool(judged) and all(r["verdict"] == "within ±30%" for r in judged)
        out[model] = {"status": "validated" if ok else "unvalidated", "error": worst, "judged": len(judged),
                      "below_noise": sum(r["verdict"] == "below noise" for r in rows),
                      "reason": None if judged else "effect below noise", "cases": rows}
    return out


# ---- runs -----------------------------------------------------------------------------------------------
_PRELOAD_CODE = (
    "import importlib, os, runpy, sys\n"
    "for m in sys.argv[1].split(','):\n"
    "    try:\n"
    "        importlib.import_module(m)\n"
    "    except Exception:\n"
    "        pass\n"
    "if sys.stdin.readline().strip() != 'go':\n"
    "    sys.exit(0)\n"
    "sys.argv = sys.argv[2:]\n"
    "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def plant_scale_of(a: argparse.Namespace, arm: str) -> str | None:
    """The arm's ``--plant-scale``: ``--plant-scale`` as given, or for an isolated arm (``@NAME``) the
    same with every other scaled anti-pattern back at 1 (train_naive.py reads the spec left to right)."""
    spec = (a.plant_scale or "").strip()
    only = arm_scaled(arm)
    if not spec or spec == "1" or (a.isolate and not only):  # isolated: the loop's group runs the plain plant
        return None
    if only:
        spec += "".join(f",{f}={1}" for f in FIXES if f != only and f not in UNSCALED)
    return spec


def check_scale(spec: str, sizes: list[int], num_steps: int) -> None:
    """ValueError when a repetition loop of ``--plant-scale`` would read as a per-env loop at one of
    ``sizes`` by perfkit's own rule (:func:`perfkit.collectors.loops.is_per_env`, which ``hot_loops`` asks): a
    loop is per-env when it iterates at least ``num_envs / 2`` times a step and an entry and its trip count
    follows the env count (``num_envs / j``, j <= 4). Its ``loop`` finding would then
    land on the planted branch and price it as a loop. A fixed repetition of another size is not one."""
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        name, _, value = part.rpartition("=")
        try:
            k = int(value)
        except ValueError:
            raise ValueError(f"--plant-scale {spec!r}: {part!r} is not K or NAME=K") from None
        per_step = k / num_steps if name == "print_tensor" else k  # printed once an iteration
        for n in sizes:
            if is_per_env(per_step, k, {k}, n):
                raise ValueError(f"--plant-scale {spec!r}: {part!r} repeats {k} times an entry and {per_step:g} a step "
                                 f"at {n} envs, a fraction of the env count: perfkit would read the repetition as a "
                                 f"per-env loop; choose a count that is not {n}/j (j <= 4)")


def script_args(a: argparse.Namespace, num_envs: int, arm: str) -> list[str]:
    fix = arm_fix(arm)
    slow = SLOW not in fix
    args = ["--num-envs", str(num_envs), "--seed", str(a.seed),
            "--iterations", str(a.slow_iterations if slow else a.iterations)]
    for opt, v in (("--num-steps", a.num_steps), ("--backend", a.backend), ("--device", a.device), ("--env", a.env)):
        if v:
            args += [opt, str(v)]
    if fix:
        args += ["--fix", ",".join(fix)]
    scale = plant_scale_of(a, arm)
    if scale:  # none at scale 1: the plain plant (a script without the option runs too)
        args += ["--plant-scale", scale]
    return args


def group_args(a: argparse.Namespace, num_envs: int, group: dict[str, Any]) -> list[str]:
    """One process for both arms of a two-arm group (``--in-process``): the baseline's arguments with
    ``--ab-fix`` the fix its arm adds; as many steady iterations per arm as a run of one arm has
    (``--iterations`` less its warm-up), after a warm-up iteration per arm."""
    (fx,) = group["arms"].values()
    args = script_args(a, num_envs, group["base"])
    i = args.index("--iterations") + 1
    args[i] = str(2 * int(args[i]))  # per arm: one warm-up and iterations - 1 steady
    return args + ["--ab-fix", fx]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Runner:
    """Plain runs of the script, each in a fresh process. With preloading, the next run's process is
    started (and imports) while the current one runs, and released when it ends."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.pending: tuple[list[str], subprocess.Popen] | None = None

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        if self.a.no_preload:
            cmd = [sys.executable, str(self.a.script), *args]
            return subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        cmd = [sys.executable, "-c", _PRELOAD_CODE, self.a.preload, str(self.a.script), *args]
        return subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run(self, args: list[str], next_args: list[str] | None) -> tuple[dict[str, float], float]:
        """(SPS by arm, wall seconds from release to exit) of one run: ``{"": sps}`` from its ``SPS:``
        line, or ``{"A": .., "B": ..}`` from the ``SPS[A]:``/``SPS[B]:`` lines of an A/B run
        (``--ab-fix``); RuntimeError when it fails or prints neither."""
        if self.pending is not None and self.pending[0] == args:
            proc = self.pending[1]
        else:
            self.close()
            proc = self._spawn(args)
        self.pending = None
        t0 = time.perf_counter()
        if next_args is not None:  # imports overlap this run; released when it ends
            self.pending = (next_args, self._spawn(next_args))
        try:
            out, err = proc.communicate(input=None if self.a.no_preload else "go\n", timeout=self.a.run_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError(f"{self.a.script.name} {' '.join(args)} ran past {self.a.run_timeout_s:.0f} s") from None
        wall = time.perf_counter() - t0
        sps = {k: float(v) for k, v in AB_SPS_RE.findall(out or "")} if "--ab-fix" in args else \
            {"": float(m[-1]) for m in [SPS_RE.findall(out or "")] if m}
        if proc.returncode != 0 or not sps:
            raise RuntimeError(f"{self.a.script.name} {' '.join(args)} failed (exit {proc.returncode}); stdout tail:\n"
                               f"{(out or '')[-1200:]}\nstderr tail:\n{(err or '')[-1500:]}")
        return sps, wall

    def close(self) -> None:
        if self.pending is not None:
            proc = self.pending[1]
            try:
                proc.communicate(input="stop\n", timeout=30)
            except Exception:
                proc.kill()
            self.pending = None


def profile_arm(a: argparse.Namespace, num_envs: int, arm: str, out: Path) -> tuple[Run, float]:
    """The arm once under ``perfkit profile`` (warm-up: the script's first iteration)."""
    path = out / "profiles" / f"n{num_envs}-{arm}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    warmup = a.num_steps or 32
    cmd = [sys.executable, "-m", "perfkit", "profile", "-q", "-o", str(path), "--warmup-steps", str(warmup),
           str(a.script), *script_args(a, num_envs, arm)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=a.run_timeout_s * 2)
    if p.returncode != 0 or not path.exists():
        raise RuntimeError(f"perfkit profile {a.script.name} {' '.join(script_args(a, num_envs, arm))} failed "
                           f"(exit {p.returncode}):\n{p.stderr[-2000:]}")
    return Run.load(path), time.perf_counter() - t0


# ---- the whole validation ---------------------------------------------------------------------------
class Validation:
    def __init__(self, a: argparse.Namespace, argv: list[str]):
        self.a = a
        self.fixes = [f for f in (a.fixes or ",".join(FIXES)).split(",") if f]
        self.base_fix = tuple(f for f in a.base_fix.split(",") if f)
        self.sizes = [int(s) for s in a.sizes.split(",") if s]
        self.groups = plan_groups(self.fixes, self.base_fix, isolate=a.isolate)
        self.arms = schedule_arms(self.groups)
        self.profile = load_profile(a.profile) if a.profile else None
        self.state: dict[str, Any] = {
            "schema": RESULTS_SCHEMA, "command": "python3 scripts/gpu/price_validate.py " + " ".join(argv),
            "machine": {}, "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "config": {"sizes": self.sizes, "fixes": self.fixes, "base_fix": list(self.base_fix),
                       "iterations": a.iterations, "slow_iterations": a.slow_iterations, "num_steps": a.num_steps,
                       "backend": a.backend, "device": a.device, "env": a.env, "seed": a.seed,
                       "plant_scale": a.plant_scale, "isolate": a.isolate,
                       "budget_s": a.budget_s, "min_rounds": a.min_rounds, "max_rounds": a.max_rounds,
                       "slow_rounds": a.slow_rounds, "preload": None if a.no_preload else a.preload,
                       "in_process": a.in_process,
                       "tolerance": TOLERANCE},
            "groups": self.groups, "profiles": {}, "predicted": {}, "runs": [], "errors": [],
        }

    # -- phases
    def profile_baselines(self) -> None:
        for n in self.sizes:
            for g in self.groups:
                log(f"n={n}: profiling baseline '{g['base']}' under perfkit profile")
                try:
                    run, wall = profile_arm(self.a, n, g["base"], self.a.out)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    self.fail(f"profile n={n} {g['base']}: {e}")
                    continue
                if not self.state["machine"]:
                    self.state["machine"] = dict(run.machine)  # the runs' machine, as the profiled run saw it
                profile = self.profile or profile_used(run) or load_profile()
                pr = predictions(run, self.a.script, list(g["arms"].values()), profile)
                self.state["profiles"][f"{n}/{g['base']}"] = {
                    "path": str(Path("profiles") / f"n{n}-{g['base']}.json"), "wall_s": round(wall, 2),
                    "step_ms_mean": (run.step_ms or {}).get("mean"), "sps": run.sps, "steps": run.steps,
                    "pricing_profile": profile.get("source"),
                    "has_sync_wait": bool(run.extra.get(EXTRA_SYNC_WAIT)),
                    "gpu_timed": any(s.gpu_ms_per_step is not None for s in run.segments.values())}
                self.state["predicted"][f"{n}/{g['base']}"] = pr
                log(f"n={n}: '{g['base']}' profiled in {wall:.1f} s, mean step {(run.step_ms or {}).get('mean')} ms; "
                    + ", ".join(f"{fx} {p['as_priced']['saved_ms']:.3g} ms ({p['as_priced']['model']})"
                                for fx, p in pr.items() if p.get("as_priced", {}).get("saved_ms") is not None))
                self.write()

    def measure(self) -> None:
        """Rounds of plain runs, each round's in a shuffled order: a process per arm, or with
        ``--in-process`` a process per group running both its arms (``train_naive.py --ab-fix``)."""
        rng = random.Random(self.a.seed)
        in_process = self.a.in_process
        runner = Runner(self.a)
        rounds_done, failures, process = 0, 0, 0
        walls: dict[tuple[int, str], float] = {}  # the last run's wall time per (size, arm)
        try:
            for rnd in range(1, self.a.max_rounds + 1):
                plan = []
                sizes = self.sizes if rnd % 2 else list(reversed(self.sizes))
                for n in sizes:
                    # the arms with the per-env loop planted are slow and only show env_loop's large effect:
                    # they run in the first --slow-rounds rounds only
                    units = [g["base"] for g in self.groups] if in_process else self.arms
                    units = [u for u in units if rnd <= self.a.slow_rounds or SLOW in arm_fix(u)]
                    rng.shuffle(units)
                    plan += [(n, u) for u in units]
                if rounds_done >= self.a.min_rounds and walls:
                    typical = sum(walls.values()) / len(walls)
                    need = sum(walls.get(p, typical) for p in plan)
                    if time.perf_counter() - T0 + need > self.a.budget_s:
                        log(f"stopping after {rounds_done} rounds: another (~{need:.0f} s) would pass the "
                            f"{self.a.budget_s:.0f} s budget")
                        break
                t_round = time.perf_counter()
                for i, (n, unit) in enumerate(plan):
                    nxt = plan[i + 1] if i + 1 < len(plan) else None
                    try:
                        sps, wall = runner.run(self._args(n, unit), self._args(*nxt) if nxt else None)
                        failures = 0
                    except RuntimeError as e:
                        self.fail(f"round {rnd} n={n} {unit}: {e}")
                        failures += 1
                        sps, wall = {}, None
                        if failures >= 3:
                            raise RuntimeError("three runs in a row failed: stopping") from None
                    if wall:
                        walls[(n, unit)] = wall
                    process += 1
                    arms = ({"A": unit, "B": next(iter(self._group(unit)["arms"]))} if in_process else {"": unit})
                    for key, arm in arms.items():
                        v = sps.get(key)
                        step = n * 1000.0 / v if v else None
                        self.state["runs"].append({"round": rnd, "num_envs": n, "arm": arm, "sps": v, "step_ms": step,
                                                   "wall_s": round(wall, 2) if wall else None, "process": process})
                        log(f"round {rnd} n={n} {arm:28s} " + (f"SPS {v:,.0f} = {step:.4g} ms/step ({wall:.1f} s)"
                                                              if v else "FAILED"))
                    self.write()
                rounds_done = rnd
                log(f"round {rnd} took {time.perf_counter() - t_round:.0f} s")
        finally:
            runner.close()

    def _group(self, base: str) -> dict[str, Any]:
        return next(g for g in self.groups if g["base"] == base)

    def _args(self, n: int, unit: str) -> list[str]:
        """The script's arguments for a run of ``unit``: an arm, or with ``--in-process`` a group (its base)."""
        return group_args(self.a, n, self._group(unit)) if self.a.in_process else script_args(self.a, n, unit)

    def fail(self, msg: str) -> None:
        log(f"FAILED: {msg}")
        self.state["errors"].append(msg)
        self.write()

    # -- analysis
    def analyse(self) -> None:
        cases, noise = [], []
        for n in self.sizes:
            times_of = {g["base"]: self._times(n, g) for g in self.groups}
            # isolated groups (two arms each) share one noise estimate per size: their residuals pooled
            pooled = pool([block_analysis(times_of[g["base"]], g["base"]) for g in self.groups if g.get("pooled")])
            for g in self.groups:
                blocks = block_analysis(times_of[g["base"]], g["base"], pooled if g.get("pooled") else None)
                noise.append({"num_envs": n, "baseline": g["base"], "arms": len(g["arms"]) + 1,
                              "rounds": blocks["rounds"], "sigma_rel": blocks["sigma_rel"], "dof": blocks["dof"],
                              "t": blocks["t"], "pooled": bool(g.get("pooled")),
                              "baseline_step_ms": (blocks["arms"].get(g["base"]) or {}).get("step_ms")})
                pred = self.state["predicted"].get(f"{n}/{g['base']}") or {}
                for arm, fx in g["arms"].items():
                    meas = blocks["arms"].get(arm)
                    t_base = (blocks["arms"].get(g["base"]) or {}).get("step_ms")
                    p = pred.get(fx) or {}
                    for v in p.values():
                        s = v.get("saved_ms")
                        v["gain"] = (t_base / (t_base - s) - 1.0) if (t_base and s is not None and s < t_base) else None
                        v["verdict"], v["error"] = verdict(s, meas)
                    cases.append({"num_envs": n, "fix": fx, "arm": arm, "baseline": g["base"], "predicted": p,
                                  "measured": meas, "baseline_step_ms": t_base})
        self.state["cases"] = cases
        self.state["noise"] = noise
        self.state["models"] = {m: {k: v for k, v in s.items()} for m, s in model_status(cases).items()}

    def _times(self, n: int, g: dict[str, Any]) -> dict[str, list[float | None]]:
        """Arm -> step time (ms) per round of group ``g`` at ``n`` envs, None where a run failed."""
        times: dict[str, list[float | None]] = {}
        for arm in [g["base"], *g["arms"]]:
            per_round: dict[int, float | None] = {}
            for r in self.state["runs"]:
                if r["num_envs"] == n and r["arm"] == arm:
                    per_round[r["round"]] = r["step_ms"]
            last = max(per_round, default=0)
            times[arm] = [per_round.get(i) for i in range(1, last + 1)]
        return times

    def data_doc(self) -> dict[str, Any]:
        """The ``perfkit.price-validation/1`` document for ``perfkit/data/price-validation.json``."""
        models = {m: {"status": s["status"], "error": s["error"], "judged": s["judged"],
                      "below_noise": s["below_noise"], "reason": s["reason"],
                      "cases": [{k: c[k] for k in ("num_envs", "fix", "variant", "predicted_ms", "measured_ms",
                                                   "noise_ms", "verdict", "error")} for c in s["cases"]]}
                  for m, s in self.state.get("models", {}).items()}
        doc = {"schema": VALIDATION_SCHEMA, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               "machine": {k: self.state["machine"].get(k) for k in ("device", "driver", "cuda", "torch", "warp")},
               "command": self.state["command"], "report": self.a.report_dir, "tolerance": TOLERANCE,
               "sizes": self.sizes, "models": models}
        return check_validation(doc)

    def write(self) -> None:
        self.analyse()
        out = self.a.out
        (out / "price-validation-results.json").write_text(json.dumps(self.state, indent=1) + "\n")
        (out / "price-validation.json").write_text(json.dumps(self.data_doc(), indent=1) + "\n")
        (out / "price-validation.md").write_text(markdown(self.state) + "\n")


# ---- report -----------------------------------------------------------------------------------------------
def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}x"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:+.0f}%"


def markdown(state: dict[str, Any]) -> str:
    cfg = state["config"]
    m = state["machine"]
    lines = ["# What-if price validation: `examples/train_naive.py`", "",
             f"`{state['command']}` on {m.get('device')} (torch {m.get('torch')}, CUDA {m.get('cuda')}, warp "
             f"{m.get('warp')}), started {state['started']}. Method: the docstring of `scripts/gpu/price_validate.py`.",
             "",
             f"Sizes {', '.join(map(str, cfg['sizes']))} envs; iterations {cfg['iterations']} "
             f"({cfg['slow_iterations']} with the per-env loop planted), num_steps {cfg['num_steps'] or 'default'}, "
             f"backend {cfg['backend'] or 'auto'}; plant scale {cfg.get('plant_scale') or '1'} "
             f"(`train_naive.py --plant-scale`: each planted anti-pattern but the per-env loop repeated that many "
             f"times a step{'; --isolate: each fix in its own group, only it scaled' if cfg.get('isolate') else ''}); "
             f"priced with "
             f"{next((p['pricing_profile'] for p in (state.get('profiles') or {}).values()), '—')}; "
             + ("both arms of a group in one process, iterations alternating A B B A after a warm-up each "
                "(`--ab-fix`), a fresh process per group and round" if cfg.get("in_process") else "fresh process per run")
             + f"{' (imports preloaded while the previous run ran)' if cfg['preload'] else ''}; tolerance ±30 %.", ""]
    lines += ["## Pricing models", "", "| model | status | worst error | judged cases | below noise |",
              "|---|---|---:|---:|---:|"]
    for name, s in (state.get("models") or {}).items():
        status = s["status"] if s["status"] == "validated" else (
            f"unvalidated (error {s['error'] * 100:+.0f}%)" if s["error"] is not None else f"unvalidated ({s['reason']})")
        lines.append(f"| `{name}` | {status} | {_pct(s['error'])} | {s['judged']} | {s['below_noise']} |")
    lines += ["", "## Noise", "",
              "Per size and baseline: the rounds every arm completed, the run-to-run noise (pooled residual SD of "
              "log step time, arm x round blocks; *pooled*: over the isolated groups of that size"
              + ("; a round of a group is one process running both arms, so this is how much the arms' difference "
                 "varies from one run to the next" if cfg.get("in_process") else "")
              + "), and the t quantile of the 95 % intervals below.", "",
              "| num_envs | baseline | arms | rounds | noise (SD) | dof | t | baseline ms/step |",
              "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for z in state.get("noise") or []:
        sd = "—" if z["sigma_rel"] is None else f"{z['sigma_rel'] * 100:.1f}%" + (" pooled" if z.get("pooled") else "")
        t = "—" if z["t"] is None else f"{z['t']:.2f}"
        lines.append(f"| {z['num_envs']} | `{z['baseline']}` | {z['arms']} | {z['rounds']} | {sd} | {z['dof']} | {t} | "
                     f"{_ms(z['baseline_step_ms'])} |")
    lines += ["", "## Predicted vs measured saving (ms per step, mean)", "",
              "Predicted: the what-if for fixing the fix's findings in the profiled baseline (as priced). Measured: "
              "baseline minus fixed mean step time, unprofiled, with its 95 % interval; *below noise* when the "
              "interval holds zero (not judged); *x noise*: the measured effect (log step time) over the noise SD.", "",
              "| num_envs | fix | baseline | model | predicted | measured (95% CI) | x noise | error | verdict | "
              "predicted gain | measured gain | findings priced |",
              "|---:|---|---|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for c in state.get("cases") or []:
        p = (c.get("predicted") or {}).get("as_priced") or {}
        meas = c.get("measured") or {}
        ci = (f"{_ms(meas.get('saved_ms'))} ({_ms(meas.get('saved_lo_ms'))}..{_ms(meas.get('saved_hi_ms'))})"
              if meas.get("saved_lo_ms") is not None else _ms(meas.get("saved_ms")))
        lines.append(f"| {c['num_envs']} | `{c['fix']}` | `{c['baseline']}` | {p.get('model') or '—'} | "
                     f"{_ms(p.get('saved_ms'))} | {ci} | {_x(meas.get('effect_sd'))} | {_pct(p.get('error'))} | "
                     f"{p.get('verdict', 'no prediction')} | "
                     f"{_pct(p.get('gain'))} | {_pct(meas.get('gain'))} | {'<br>'.join(p.get('findings') or []) or '—'} |")
    syncs = [c for c in state.get("cases") or [] if len(c.get("predicted") or {}) > 1]
    if syncs:
        lines += ["", "## Sync models", "",
                  "The same records priced three ways: with the measured sync waits (`sync_wait`, as priced), "
                  "without them (`backlog_split`), and without GPU timing (`round_trip`: a CPU-only machine's "
                  "prediction with these prices).", "",
                  "| num_envs | fix | measured | sync_wait / as priced | backlog_split | round_trip |",
                  "|---:|---|---:|---:|---:|---:|"]
        for c in syncs:
            cells = []
            for v in VARIANTS:
                p = c["predicted"].get(v)
                cells.append("—" if not p else f"{_ms(p.get('saved_ms'))} ({p.get('model')}, {p.get('verdict')})")
            lines.append(f"| {c['num_envs']} | `{c['fix']}` | {_ms((c.get('measured') or {}).get('saved_ms'))} | "
                         + " | ".join(cells) + " |")
    if state.get("errors"):
        lines += ["", "## Errors", ""] + [f"* {e.splitlines()[0]}" for e in state["errors"]]
    lines += ["", f"Runs: {len(state.get('runs') or [])} plain, {len(state.get('profiles') or {})} profiled. "
              "`price-validation.json` here is what `perfkit/data/price-validation.json` holds once committed."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--script", type=Path, default=NAIVE, help="the planted training script (default: %(default)s)")
    ap.add_argument("--sizes", default="512,4096", help="num_envs, comma list (default: %(default)s)")
    ap.add_argument("--fixes", default=None, help=f"comma list (default: all of {', '.join(FIXES)})")
    ap.add_argument("--base-fix", default=SLOW, help="fixed in the baseline of the other fixes (default: %(default)s)")
    ap.add_argument("--iterations", type=int, default=8, help="per run, arms without the per-env loop")
    ap.add_argument("--slow-iterations", type=int, default=3, help="per run, arms with the per-env loop planted")
    ap.add_argument("--num-steps", type=int, default=None, help="rollout length per iteration (default: the script's)")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--env", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                    help="each fix but --base-fix in its own group, whose two arms run only that anti-pattern at the "
                    "plant scale, the loop's group at scale 1, the noise of a size pooled: effects no longer add up "
                    "in one baseline; a profiled baseline and two runs a round per fix (default: on; --no-isolate: "
                    "one baseline for all, every arm at the plant scale)")
    ap.add_argument("--in-process", action=argparse.BooleanOptionalAction, default=True,
                    help="both arms of a group in one process, its iterations alternating A B B A after a warm-up "
                    "each (train_naive.py --ab-fix): a drift of the machine falls on both arms alike; a process per "
                    "group and round (default: on; needs --isolate; --no-in-process: a fresh process per arm)")
    ap.add_argument("--plant-scale", default=PLANT_SCALE, help="train_naive.py --plant-scale for every run and "
                    "profiled baseline: K or K,NAME=K2 (default: %(default)s; 1: the plain plant)")
    ap.add_argument("--profile", default=None, help="machine cost profile to price with (default: this machine's "
                    "cached one, else the reference)")
    ap.add_argument("--budget-s", type=float, default=330.0, help="profiling + measuring; rounds stop past it")
    ap.add_argument("--min-rounds", type=int, default=2)
    ap.add_argument("--max-rounds", type=int, default=5)
    ap.add_argument("--run-timeout-s", type=float, default=180.0)
    ap.add_argument("--slow-rounds", type=int, default=2, help="rounds that run the arms with the per-env loop "
                    "planted (their effect is large; later rounds measure the others)")
    ap.add_argument("--no-preload", action="store_true", help="start each run's process only when it is due")
    ap.add_argument("--preload", default=",".join(PRELOAD), help="modules a run's process imports before it is "
                    "released (default: %(default)s)")
    ap.add_argument("--report-dir", default="reports/price-validation-h200",
                    help="where the results are committed (named in price-validation.json)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    a.script = a.script.resolve()
    if not a.script.exists():
        log(f"{a.script} is not in this tree: nothing to validate against")
        (a.out / "price-validation-error.txt").write_text(f"{a.script} missing\n")
        return 1
    try:
        check_scale(a.plant_scale or "1", [int(x) for x in a.sizes.split(",") if x], a.num_steps or 32)
    except ValueError as e:
        ap.error(str(e))
    v = Validation(a, argv)
    if a.in_process and any(len(g["arms"]) != 1 for g in v.groups):
        ap.error("--in-process runs the two arms of a group in one process: it needs --isolate (or --no-in-process)")
    n_runs = len(v.arms) * len(v.sizes)
    log(f"plan: {len(v.groups) * len(v.sizes)} profiled baselines, then rounds of {n_runs} plain runs "
        f"({', '.join(v.arms)} at {', '.join(map(str, v.sizes))} envs), {a.min_rounds}..{a.max_rounds} rounds "
        f"within {a.budget_s:.0f} s")
    try:
        v.profile_baselines()
        v.measure()
    except RuntimeError as e:
        v.fail(str(e))
    v.write()
    for name, s in (v.state.get("models") or {}).items():
        log(f"model {name:14s} {s['status']:12s} worst error {_pct(s['error']):>6s} "
            f"(judged {s['judged']}, below noise {s['below_noise']})")
    log(f"done in {time.perf_counter() - T0:.0f} s -> {a.out / 'price-validation.md'}")
    return 1 if v.state["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
