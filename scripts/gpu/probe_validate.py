#!/usr/bin/env python3
"""On the GPU: measure this machine's cost profile with the full probes, then check the cost model.

    python3 scripts/gpu/probe_validate.py --out DIR [--num-envs 256] [--iterations 10] [--repeats 3] [--budget-s 150]

1. **Probes** -> ``DIR/machine-profile.json`` (``perfkit.machine-profile/1``; commit it as
   ``perfkit/data/h200-profile.json``) and ``DIR/machine-profile.md`` (the table). The profile is also
   stored in this machine's cache, so later ``perfkit`` runs here price with it.
2. **Validation** of the model on ``examples/train_naive.py``, which plants the classic anti-patterns
   and removes any of them with ``--fix NAME[,NAME...]`` (names: ``FIXES`` below) and prints
   ``SPS: <float>`` last:
   * *predicted*: ``perfkit profile`` the baseline once; attribute its findings to the planted
     anti-patterns (``# planted: NAME`` comments on the planted lines of train_naive.py; where the
     file has none, by profiling each ``--fix NAME`` run too and taking the findings that vanish);
     price them with the profile from step 1 against the *unprofiled* baseline step time; the
     predicted gain of a fix is ``step / step_after - 1`` (:func:`perfkit.analysis.cost.predict`).
   * *measured*: the baseline and each single fix run unprofiled, interleaved (baseline, fix1, ...,
     fix7, baseline, ...), ``--repeats`` rounds or as many as ``--budget-s`` allows (at least one,
     plus a second baseline run when only one round fits);
     medians; gain = ``median SPS(fix) / median SPS(baseline) - 1``.
   * a fix *agrees* when ``|predicted - measured| <= 30% of |measured|``, judged on the SPS gain (the
     issue's criterion) and on the ms per step saved (better conditioned for a fix that removes most
     of the step: its gain grows without bound as the step shrinks); a gain smaller than the
     baseline's own run-to-run spread is reported as *below noise* rather than judged.
   Writes ``DIR/validation.json`` and ``DIR/validation.md``.

Exit status: 0 when everything ran (whatever the agreement), 1 when a step could not run (a probe
errored, train_naive.py missing or without ``--fix``, a run failed). Finishes in about ``--budget-s``
plus the probes (~20 s).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfkit.analysis.cost import loop_body_findings, predict, price_run  # noqa: E402
from perfkit.costs_profile import build_profile, save_profile  # noqa: E402
from perfkit.record import Finding, Run  # noqa: E402

NAIVE = ROOT / "examples" / "train_naive.py"
FIXES = ("item_log", "nonzero_reset", "env_loop", "fresh_tensors", "print_tensor", "cpu_numpy", "list_gather")
TOLERANCE = 0.30
SPS_RE = re.compile(r"^SPS:\s*([0-9.eE+-]+)\s*$", re.M)
MARK_RE = re.compile(r"#\s*planted(?:-(begin|end))?:\s*([A-Za-z_,\s]+)")


def log(msg: str) -> None:
    print(f"[probe_validate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- step 1: probes ---------------------------------------------------------------------------------
def profile_markdown(profile: dict) -> str:
    m = profile["machine"]
    lines = [f"# Machine cost profile: {m.get('device')}", "",
             f"`{profile['key']}` — torch {m.get('torch')}, CUDA {m.get('cuda')}, driver {m.get('driver')}, "
             f"warp {m.get('warp')}, measured {profile['created']} by `python3 scripts/gpu/probe_validate.py`"
             f"{' (quick mode)' if profile.get('quick') else ''}.", "",
             "## Costs the model uses", "", "| cost | value | from |", "|---|---:|---|"]
    for name, value in profile["costs"].items():
        unit = "GB/s" if name.endswith("gbps") else "µs"
        shown = value if unit == "GB/s" else value * 1e3
        lines.append(f"| `{name}` | {shown:.4g} {unit} | `{profile['cost_sources'][name]}` |")
    lines += ["", "## Probe results", ""]
    for name, res in profile["probes"].items():
        lines.append(f"### {name} ({res.get('status')}, {res.get('seconds')} s)")
        lines.append("")
        lines.append("```json")
        lines.append(json.dumps({k: v for k, v in res.items() if k not in ("seconds",)}, indent=1))
        lines.append("```")
        lines.append("")
    return "\n".join(lines)


def run_probes(out: Path, quick: bool) -> dict:
    import probes

    t0 = time.perf_counter()
    results = probes.run_all(quick=quick, progress=lambda n: log(f"probe {n}"))
    profile = build_profile(results)
    save_profile(profile, out / "machine-profile.json")
    save_profile(profile)  # this machine's cache
    (out / "machine-profile.md").write_text(profile_markdown(profile) + "\n")
    log(f"probes done in {time.perf_counter() - t0:.1f} s -> {out / 'machine-profile.json'}")
    for name, value in profile["costs"].items():
        unit = "GB/s" if name.endswith("gbps") else "us"
        log(f"  {name:24s} {value if unit == 'GB/s' else value * 1e3:10.4g} {unit}")
    return profile


# ---- step 2: validation ------------------------------------------------------------------------------
def naive_args(a: argparse.Namespace) -> list[str]:
    args = ["--num-envs", str(a.num_envs), "--seed", str(a.seed)]
    if a.iterations:
        args += ["--iterations", str(a.iterations)]
    if a.backend:
        args += ["--backend", a.backend]
    if a.env:
        args += ["--env", a.env]
    return args


def run_naive(a: argparse.Namespace, fix: str | None) -> float:
    cmd = [sys.executable, str(a.script), *naive_args(a)] + (["--fix", fix] if fix else [])
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.run_timeout_s)
    m = SPS_RE.findall(p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}); stdout tail:\n{p.stdout[-1500:]}\n"
                           f"stderr tail:\n{p.stderr[-1500:]}")
    return float(m[-1])


_PROFILE_CODE = (
    "import sys\n"
    "from perfkit.runner import run\n"
    "out = run(sys.argv[1], sys.argv[3:])\n"
    "out.run.save(sys.argv[2])\n"
    "sys.exit(out.exit_code)\n"
)


def profile_naive(a: argparse.Namespace, fix: str | None, out: Path) -> Run:
    """The script run once under a perfkit session (what ``perfkit profile -o`` does), in a subprocess."""
    path = out / f"naive-{fix or 'baseline'}.json"
    cmd = [sys.executable, "-c", _PROFILE_CODE, str(a.script), str(path), *naive_args(a)]
    cmd += ["--fix", fix] if fix else []
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.run_timeout_s * 2)
    if p.returncode != 0 or not path.exists():
        raise RuntimeError(f"profiling {a.script.name} {' '.join(cmd[5:])} failed (exit {p.returncode}):\n"
                           f"{p.stderr[-2000:]}")
    return Run.load(path)


def planted_lines(source: str) -> dict[int, set[str]]:
    """Line -> anti-pattern names, from ``# planted: NAME`` on a line or ``# planted-begin/end: NAME`` blocks."""
    marks: dict[int, set[str]] = {}
    open_blocks: dict[str, int] = {}
    for no, line in enumerate(source.splitlines(), 1):
        for kind, names in MARK_RE.findall(line):
            for name in (n.strip() for n in names.split(",")):
                if not name:
                    continue
                if kind == "begin":
                    open_blocks[name] = no
                elif kind == "end" and name in open_blocks:
                    for ln in range(open_blocks.pop(name), no + 1):
                        marks.setdefault(ln, set()).add(name)
                else:
                    marks.setdefault(no, set()).add(name)
    return marks


def attribute_by_markers(run: Run, script: Path) -> dict[str, list[tuple[Finding, float]]]:
    """Findings on marked lines; a marked per-env loop brings the findings of its body with it."""
    marks = planted_lines(script.read_text())
    out: dict[str, list[tuple[Finding, float]]] = {}
    for f in run.findings:
        if Path(f.path).name == script.name:
            for name in marks.get(f.line, ()):
                owned = out.setdefault(name, [])
                for g in [f, *(loop_body_findings(f, run) if f.kind == "loop" else [])]:
                    if all(g is not h for h, _ in owned):
                        owned.append((g, 1.0))
    return out


def attribute_by_diff(base: Run, fixed: dict[str, Run]) -> dict[str, list[tuple[Finding, float]]]:
    """A baseline finding belongs to fix NAME by the share of its per-step rate that the fix removes."""
    out: dict[str, list[tuple[Finding, float]]] = {}
    for name, run in fixed.items():
        rates = {(f.kind, f.op, f.path, f.line): f.per_step for f in run.findings}
        for f in base.findings:
            if not f.per_step:
                continue
            left = rates.get((f.kind, f.op, f.path, f.line), 0.0)
            share = max(0.0, 1.0 - left / f.per_step)
            if share >= 0.5:
                out.setdefault(name, []).append((f, share))
    return out


def verdict(pred: float | None, meas: float | None, noise: float | None) -> str:
    """Agreement of a predicted and a measured quantity (a gain, or ms saved per step)."""
    if pred is None or meas is None:
        return "no findings attributed"
    if noise is not None and abs(meas) <= noise and abs(pred) <= noise:
        return "below noise (both)"
    if abs(pred - meas) <= TOLERANCE * abs(meas):
        return "within ±30%"
    return "over-predicted" if pred > meas else "under-predicted"


def validate(a: argparse.Namespace, profile: dict, out: Path) -> dict:
    if not a.script.exists():
        raise RuntimeError(f"{a.script} is not in this tree: nothing to validate against")
    help_text = subprocess.run([sys.executable, str(a.script), "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=120).stdout
    if "--fix" not in help_text:
        raise RuntimeError(f"{a.script.name} has no --fix option; the validation needs --fix NAME[,NAME...] "
                           f"with names {', '.join(FIXES)}")
    fixes = [f for f in a.fixes.split(",") if f] if a.fixes else list(FIXES)

    log("profiling the baseline under perfkit profile")
    base = profile_naive(a, None, out)
    attribution = attribute_by_markers(base, a.script)
    method = "markers"
    if not attribution:
        method = "diff"
        log("no '# planted:' markers in train_naive.py: attributing by profiling each single fix")
        attribution = attribute_by_diff(base, {fx: profile_naive(a, fx, out) for fx in fixes})

    log(f"measuring SPS: baseline + {len(fixes)} single fixes, interleaved, up to {a.repeats} rounds")
    sps: dict[str, list[float]] = {v: [] for v in ["baseline", *fixes]}
    t0 = time.perf_counter()
    for rnd in range(a.repeats):
        round_t0 = time.perf_counter()
        for v in sps:
            sps[v].append(run_naive(a, None if v == "baseline" else v))
        took = time.perf_counter() - round_t0
        log(f"round {rnd + 1}: " + ", ".join(f"{v}={s[-1]:.4g}" for v, s in sps.items()))
        if time.perf_counter() - t0 + took > a.budget_s:
            log(f"stopping after {rnd + 1} round(s): the next would pass --budget-s {a.budget_s}")
            break
    if len(sps["baseline"]) < 2:  # one round only: a second baseline still gives the run-to-run spread
        sps["baseline"].append(run_naive(a, None))
    med = {v: statistics.median(s) for v, s in sps.items()}
    base_runs = sps["baseline"]
    noise = (max(base_runs) - min(base_runs)) / med["baseline"] if len(base_runs) > 1 else None

    # price the profiled baseline against the unprofiled baseline step time
    priced = price_run(Run.from_dict(base.to_dict()), profile)
    if priced.num_envs:
        priced.sps = med["baseline"]
        priced.step_ms = {"p50": priced.num_envs * 1000.0 / med["baseline"]}
    by_site = {(f.kind, f.op, f.path, f.line): f for f in priced.findings}
    step_base = priced.step_ms.get("p50")
    rows = []
    for fx in fixes:
        owned = [(by_site[(f.kind, f.op, f.path, f.line)], share) for f, share in attribution.get(fx, [])]
        saved = sum((f.est_ms_per_step or 0.0) * share for f, share in owned)
        pred = predict(priced, saved_ms=saved)["gain"] if owned else None
        meas = med[fx] / med["baseline"] - 1.0
        meas_saved = step_base - priced.num_envs * 1000.0 / med[fx] if priced.num_envs else None
        rows.append({"fix": fx, "findings": [f"{f.kind} {f.op} {f.site} x{f.per_step:g}/step share {s:.2f}"
                                             for f, s in owned],
                     "predicted_saved_ms": saved if owned else None, "measured_saved_ms": meas_saved,
                     "predicted_gain": pred, "measured_gain": meas,
                     "median_sps": med[fx], "sps_runs": sps[fx],
                     "verdict": verdict(pred, meas, noise),
                     "verdict_ms": verdict(saved if owned else None, meas_saved,
                                           noise * step_base if noise is not None else None)})
    return {"num_envs": a.num_envs, "iterations": a.iterations, "backend": a.backend, "env": a.env,
            "attribution": method, "baseline_sps_runs": base_runs, "baseline_median_sps": med["baseline"],
            "baseline_noise": noise, "step_ms_unprofiled": step_base,
            "profiled_baseline_sps": base.sps, "gpu_ms_per_step": priced.extra["pricing"]["gpu_ms_per_step"],
            "tolerance": TOLERANCE, "rows": rows, "pricing": priced.extra["pricing"]}


def validation_markdown(v: dict) -> str:
    pct = lambda x: "—" if x is None else f"{x * 100:+.1f}%"  # noqa: E731
    lines = ["# Cost model validation: `examples/train_naive.py`", "",
             f"num_envs {v['num_envs']}, iterations {v['iterations']}, backend {v['backend']}, env {v['env']}; "
             f"baseline median SPS {v['baseline_median_sps']:.4g} over {len(v['baseline_sps_runs'])} runs "
             f"(spread {pct(v['baseline_noise'])}); unprofiled step {v['step_ms_unprofiled']:.4g} ms; "
             f"GPU time per step (profiled) {v['gpu_ms_per_step']}; findings attributed by {v['attribution']}.", "",
             f"Priced with: {v['pricing']['profile']}", "",
             "| fix | predicted SPS gain | measured SPS gain | verdict (gain) | predicted ms/step saved | "
             "measured ms/step saved | verdict (ms) | median SPS | findings priced |",
             "|---|---:|---:|---|---:|---:|---|---:|---|"]
    ms = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
    for r in v["rows"]:
        lines.append(f"| `{r['fix']}` | {pct(r['predicted_gain'])} | {pct(r['measured_gain'])} | {r['verdict']} | "
                     f"{ms(r['predicted_saved_ms'])} | {ms(r['measured_saved_ms'])} | {r['verdict_ms']} | "
                     f"{r['median_sps']:.4g} | {'<br>'.join(r['findings']) or '—'} |")
    lines += ["", "The SPS gain is the issue's criterion; the ms/step saved is the better-conditioned one for a fix "
              "that removes most of the step (its gain grows without bound as the step shrinks).", "",
              "Command: `python3 scripts/gpu/probe_validate.py --out DIR` "
              "(see the script's docstring for the method)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="quick probes (a smoke test of this script)")
    ap.add_argument("--skip-validation", action="store_true")
    ap.add_argument("--script", type=Path, default=NAIVE, help="the planted training script (default: %(default)s)")
    ap.add_argument("--num-envs", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=10, help="passed to train_naive.py (0: its own default)")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--env", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fixes", default=None, help=f"comma list (default: all of {', '.join(FIXES)})")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop adding measurement rounds past this")
    ap.add_argument("--run-timeout-s", type=float, default=120.0)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")

    profile = run_probes(a.out, a.quick)
    status = 0
    errored = [n for n, r in profile["probes"].items() if r.get("status") == "error"]
    if errored:
        log(f"FAILED probes: {', '.join(errored)} (see machine-profile.md)")
        status = 1
    if a.skip_validation:
        return status
    try:
        v = validate(a, profile, a.out)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"VALIDATION FAILED: {e}")
        (a.out / "validation.md").write_text(f"# Cost model validation: did not run\n\n```\n{e}\n```\n")
        return 1
    (a.out / "validation.json").write_text(json.dumps(v, indent=1) + "\n")
    (a.out / "validation.md").write_text(validation_markdown(v) + "\n")
    for r in v["rows"]:
        p = "—" if r["predicted_gain"] is None else f"{r['predicted_gain'] * 100:+.1f}%"
        log(f"  {r['fix']:14s} gain predicted {p:>8s} measured {r['measured_gain'] * 100:+8.1f}%  {r['verdict']:16s}"
            f" | ms/step saved predicted {r['predicted_saved_ms'] or 0:.4g} measured {r['measured_saved_ms']:.4g}"
            f"  {r['verdict_ms']}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
