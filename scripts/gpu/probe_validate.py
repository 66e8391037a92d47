#!/usr/bin/env python3
"""On the GPU: measure this machine's cost profile with the full probes, then check the cost model.

    python3 scripts/gpu/probe_validate.py --out DIR [--num-envs 256] [--iterations 10] [--repeats 5] [--budget-s 100]

1. **Probes** -> ``DIR/machine-profile.json`` (``perfkit.machine-profile/1``; commit it as
   ``perfkit/data/h200-profile.json``) and ``DIR/machine-profile.md`` (the table). The profile is also
   stored in this machine's cache, so later ``perfkit`` runs here price with it.
2. **Validation** of the model on ``examples/train_naive.py``, which plants the classic anti-patterns
   (each marked ``# ANTI-PATTERN name`` on its line), removes any of them with ``--fix NAME[,NAME...]``
   (names: ``FIXES`` below) and prints ``SPS: <float>`` last (its ``main(argv)`` returns it):
   * *predicted*: profile the baseline once under a perfkit session (``perfkit.profile.runner``, what
     ``perfkit profile -o`` runs), in a subprocess; attribute its findings to the anti-patterns by the
     markers (a marked per-env loop brings the findings in its body; ``# planted: NAME`` and
     ``# planted-begin/end: NAME`` blocks work too; with no markers at all, by profiling each
     ``--fix NAME`` run as well and taking the findings that vanish); price them with the profile from
     step 1 against the *unprofiled* baseline's mean step time (``num_envs * 1000 / SPS``: the
     cost model's one statistic); the predicted gain of a fix is ``step / step_after - 1``
     (:func:`perfkit.pricing.cost.predict`).
   * *measured*: the baseline and each single fix, unprofiled, interleaved (baseline, fix1, ..., fix7,
     baseline, ...), ``--repeats`` rounds or as many as ``--budget-s`` allows (at least one, plus a
     second baseline run when only one round fits); medians; gain = ``median SPS(fix) / median
     SPS(baseline) - 1``. Runs go through the script's ``main(argv)`` in this process (after one
     short warm-up run) — the runs are many and short, and a fresh interpreter, torch and Warp per
     run would cost more than the runs — or, with ``--subprocess``, one process each.
   * two passes by default: all anti-patterns planted, then with ``env_loop`` fixed in the baseline
     too (the per-env loop dominates the step and hides the others' gains in the noise).
   * a fix *agrees* when ``|predicted - measured| <= 30% of |measured|``, judged on the SPS gain (the
     issue's criterion) and on the ms per step saved (better conditioned for a fix that removes most
     of the step: its gain grows without bound as the step shrinks); a gain smaller than the
     baseline's own run-to-run spread on both sides is reported as *below noise* rather than judged.
   Writes ``DIR/validation.json`` and ``DIR/validation.md`` (and the profiled runs ``DIR/naive-*.json``).

The validation of the what-if prices that the reports label each pricing model with (issue 12: both
sizes, fresh processes, noise-aware verdicts, ``perfkit/data/price-validation.json``) is
``scripts/gpu/price_validate.py``; step 2 here is the older single-size, in-process check.

Exit status: 0 when everything ran (whatever the agreement), 1 when a step could not run (a probe
errored, train_naive.py missing or without ``--fix``, a run failed). Takes about ``--budget-s`` (measuring)
plus the probes (~30 s) plus two profiled runs and two warm-up runs (~15 s each once Warp's kernel
cache is warm; the first MuJoCo Warp compile on a fresh machine adds ~60 s): ~3.5 min by default.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import io
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

from perfkit.pricing.cost import loop_body_findings, predict, price_run  # noqa: E402
from perfkit.pricing.machine_profile import build_profile, save_profile  # noqa: E402
from perfkit.machine import label  # noqa: E402
from perfkit.record import Finding, Run  # noqa: E402

NAIVE = ROOT / "examples" / "train_naive.py"
FIXES = ("item_log", "nonzero_reset", "env_loop", "fresh_tensors", "print_tensor", "cpu_numpy", "list_gather")
TOLERANCE = 0.30
SPS_RE = re.compile(r"^SPS:\s*([0-9.eE+-]+)\s*$", re.M)
MARK_RE = re.compile(r"#\s*planted(?:-(begin|end))?:\s*([A-Za-z_,\s]+)")
ANTI_RE = re.compile(r"#\s*ANTI-PATTERN\s+([a-z_]+)")


def log(msg: str) -> None:
    print(f"[probe_validate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- step 1: probes ---------------------------------------------------------------------------------
def profile_markdown(profile: dict) -> str:
    m = profile["machine"]
    lines = [f"# Machine cost profile: {m.get('device')}", "",
             f"{label(m)}" + (f", warp {m['warp']}" if m.get("warp") else "") +
             f"; measured {profile['created']} by `python3 scripts/gpu/probe_validate.py`"
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
    import perfkit.probes as probes

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
def naive_args(a: argparse.Namespace, fix: list[str] | tuple[str, ...] = ()) -> list[str]:
    args = ["--num-envs", str(a.num_envs), "--seed", str(a.seed)]
    if a.iterations:
        args += ["--iterations", str(a.iterations)]
    if a.backend:
        args += ["--backend", a.backend]
    if a.env:
        args += ["--env", a.env]
    if fix:
        args += ["--fix", ",".join(fix)]
    return args


class Measure:
    """Runs the training script once and returns its ``SPS:``. In this process through the script's
    ``main(argv)`` when it has one (no interpreter, torch or Warp start-up per run: the runs are short
    and many), else as a subprocess."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.main = None
        if not a.subprocess:
            spec = importlib.util.spec_from_file_location("_perfkit_validate_target", a.script)
            mod = importlib.util.module_from_spec(spec)
            with contextlib.redirect_stdout(io.StringIO()):
                spec.loader.exec_module(mod)  # defines main; runs nothing under the __main__ guard
            self.main = getattr(mod, "main", None) if callable(getattr(mod, "main", None)) else None
        self.mode = "in-process" if self.main else "subprocess"

    def __call__(self, fix: list[str] | tuple[str, ...], iterations: int | None = None) -> float:
        a = argparse.Namespace(**{**vars(self.a), "iterations": iterations}) if iterations else self.a
        argv = naive_args(a, fix)
        if self.main is not None:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                ret = self.main(argv)
            gc.collect()
            if isinstance(ret, (int, float)):
                return float(ret)
            m = SPS_RE.findall(buf.getvalue())
            if not m:
                raise RuntimeError(f"{self.a.script.name} {' '.join(argv)} printed no 'SPS: <float>' line")
            return float(m[-1])
        cmd = [sys.executable, str(self.a.script), *argv]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=self.a.run_timeout_s)
        m = SPS_RE.findall(p.stdout)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}); stdout tail:\n{p.stdout[-1500:]}\n"
                               f"stderr tail:\n{p.stderr[-1500:]}")
        return float(m[-1])


_PROFILE_CODE = (
    "import sys\n"
    "from perfkit.profile.runner import run\n"
    "out = run(sys.argv[1], sys.argv[3:])\n"
    "out.run.save(sys.argv[2])\n"
    "sys.exit(out.exit_code)\n"
)


def profile_naive(a: argparse.Namespace, fix: list[str] | tuple[str, ...], out: Path) -> Run:
    """The script run once under a perfkit session (what ``perfkit profile -o`` does), in a subprocess."""
    path = out / f"naive-fix-{'+'.join(fix) or 'none'}.json"
    cmd = [sys.executable, "-c", _PROFILE_CODE, str(a.script), str(path), *naive_args(a, fix)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.run_timeout_s * 2)
    if p.returncode != 0 or not path.exists():
        raise RuntimeError(f"profiling {a.script.name} {' '.join(cmd[5:])} failed (exit {p.returncode}):\n"
                           f"{p.stderr[-2000:]}")
    return Run.load(path)


def planted_lines(source: str) -> dict[int, set[str]]:
    """Line -> anti-pattern names: ``# ANTI-PATTERN name`` (train_naive.py's marker) or ``# planted: NAME[,NAME]``
    on a line, or ``# planted-begin: NAME`` ... ``# planted-end: NAME`` around a block."""
    marks: dict[int, set[str]] = {}
    open_blocks: dict[str, int] = {}
    for no, line in enumerate(source.splitlines(), 1):
        for name in ANTI_RE.findall(line):
            marks.setdefault(no, set()).add(name)
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


def spread(sps: dict[str, list[float]], med: dict[str, float]) -> float:
    """Run-to-run noise, relative: the baseline's spread (max - min over median), or the median of every
    repeated variant's spread when that is larger (two baseline runs alone under-state it)."""
    rel = [(max(v) - min(v)) / med[k] for k, v in sps.items() if len(v) > 1]
    base = (max(sps["baseline"]) - min(sps["baseline"])) / med["baseline"]
    return max(base, statistics.median(rel)) if rel else base


def check_script(a: argparse.Namespace) -> None:
    if not a.script.exists():
        raise RuntimeError(f"{a.script} is not in this tree: nothing to validate against")
    help_text = subprocess.run([sys.executable, str(a.script), "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=120).stdout
    if "--fix" not in help_text:
        raise RuntimeError(f"{a.script.name} has no --fix option; the validation needs --fix NAME[,NAME...] "
                           f"with names {', '.join(FIXES)}")


def validate(a: argparse.Namespace, profile: dict, out: Path, fixes: list[str], base_fix: tuple[str, ...] = (),
             measure: Measure | None = None, budget_s: float | None = None) -> dict:
    """One pass: the baseline (with ``base_fix`` already applied) against each single fix on top of it."""
    measure = measure or Measure(a)
    budget_s = a.budget_s if budget_s is None else budget_s
    label = f"baseline{' + ' + ','.join(base_fix) if base_fix else ''}"
    log(f"[{label}] profiling under a perfkit session")
    base = profile_naive(a, base_fix, out)
    attribution = attribute_by_markers(base, a.script)
    method = "markers"
    if not attribution:
        method = "diff"
        log(f"[{label}] no anti-pattern markers in {a.script.name}: attributing by profiling each single fix")
        attribution = attribute_by_diff(base, {fx: profile_naive(a, (*base_fix, fx), out) for fx in fixes})

    if measure.mode == "in-process":
        measure(base_fix, iterations=2)  # warm-up: CUDA context, Warp module load, graph capture, allocator
    log(f"[{label}] measuring SPS ({measure.mode}): baseline + {len(fixes)} single fixes, interleaved, "
        f"up to {a.repeats} rounds / {budget_s:.0f} s")
    sps: dict[str, list[float]] = {v: [] for v in ["baseline", *fixes]}
    t0 = time.perf_counter()
    for rnd in range(a.repeats):
        round_t0 = time.perf_counter()
        for v in sps:
            sps[v].append(measure(base_fix if v == "baseline" else (*base_fix, v)))
        took = time.perf_counter() - round_t0
        log(f"[{label}] round {rnd + 1} ({took:.0f} s): " + ", ".join(f"{v}={s[-1]:.4g}" for v, s in sps.items()))
        if time.perf_counter() - t0 + took > budget_s:
            if rnd + 1 < a.repeats:
                log(f"[{label}] stopping after {rnd + 1} round(s): the next would pass the budget")
            break
    if len(sps["baseline"]) < 2:  # one round only: a second baseline still gives the run-to-run spread
        sps["baseline"].append(measure(base_fix))
    med = {v: statistics.median(s) for v, s in sps.items()}
    base_runs = sps["baseline"]
    noise = spread(sps, med)

    # price the profiled baseline against the unprofiled baseline step time
    priced = price_run(Run.from_dict(base.to_dict()), profile)
    num_envs = priced.num_envs or a.num_envs
    priced.num_envs = num_envs
    priced.sps = med["baseline"]
    priced.step_ms = {"mean": num_envs * 1000.0 / med["baseline"]}  # the model's statistic: the mean step
    by_site = {(f.kind, f.op, f.path, f.line): f for f in priced.findings}
    step_base = priced.step_ms["mean"]
    rows = []
    for fx in fixes:
        owned = [(by_site[(f.kind, f.op, f.path, f.line)], share) for f, share in attribution.get(fx, [])]
        saved = sum((f.est_ms_per_step or 0.0) * share for f, share in owned) if owned else None
        pred = predict(priced, saved_ms=saved)["gain"] if owned else None
        meas = med[fx] / med["baseline"] - 1.0
        meas_saved = step_base - num_envs * 1000.0 / med[fx]
        rows.append({"fix": fx, "findings": [f"{f.kind} {f.op} {f.site} x{f.per_step:g}/step "
                                             f"~{(f.est_ms_per_step or 0) * 1e3:.1f} us/step"
                                             + (f" share {sh:.2f}" if sh != 1.0 else "") for f, sh in owned],
                     "predicted_saved_ms": saved, "measured_saved_ms": meas_saved,
                     "predicted_gain": pred, "measured_gain": meas, "median_sps": med[fx], "sps_runs": sps[fx],
                     "verdict": verdict(pred, meas, noise), "verdict_ms": verdict(saved, meas_saved, noise * step_base)})
    return {"base_fix": list(base_fix), "num_envs": num_envs, "iterations": a.iterations, "backend": a.backend,
            "env": a.env, "attribution": method, "measured": measure.mode, "baseline_sps_runs": base_runs,
            "baseline_median_sps": med["baseline"], "baseline_noise": noise, "step_ms_unprofiled": step_base,
            "profiled_baseline_sps": base.sps, "gpu_ms_per_step": priced.pricing.prices["gpu_ms_per_step"],
            "gpu_backlog_ms_per_step": priced.pricing.prices["gpu_backlog_ms_per_step"],
            "tolerance": TOLERANCE, "rows": rows, "pricing": priced.pricing.prices}


def validation_markdown(passes: list[dict]) -> str:
    pct = lambda x: "—" if x is None else f"{x * 100:+.1f}%"  # noqa: E731
    ms = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
    lines = ["# Cost model validation: `examples/train_naive.py`", "",
             "Predicted (perfkit profile of the baseline, priced with this machine's probe profile) vs measured "
             "(unprofiled runs, interleaved, medians) gain from removing one planted anti-pattern at a time.", ""]
    for v in passes:
        lines += [f"## Baseline: {'all anti-patterns' if not v['base_fix'] else 'all but ' + ', '.join(v['base_fix'])}",
                  "",
                  f"num_envs {v['num_envs']}, iterations {v['iterations']}, backend {v['backend'] or 'default'}, "
                  f"env {v['env'] or 'default'}; baseline median SPS {v['baseline_median_sps']:.4g} over "
                  f"{len(v['baseline_sps_runs'])} runs (run-to-run noise {pct(v['baseline_noise'])}); unprofiled step "
                  f"{v['step_ms_unprofiled']:.4g} ms; GPU backlog per step (profiled) "
                  f"{ms(v['gpu_backlog_ms_per_step'])} ms; findings attributed by {v['attribution']}; "
                  f"runs measured {v['measured']}.", "",
                  f"Priced with: {v['pricing']['profile']}", "",
                  "| fix | predicted SPS gain | measured SPS gain | verdict (gain) | predicted ms/step saved | "
                  "measured ms/step saved | verdict (ms) | median SPS | findings priced |",
                  "|---|---:|---:|---|---:|---:|---|---:|---|"]
        for r in v["rows"]:
            lines.append(f"| `{r['fix']}` | {pct(r['predicted_gain'])} | {pct(r['measured_gain'])} | {r['verdict']} | "
                         f"{ms(r['predicted_saved_ms'])} | {ms(r['measured_saved_ms'])} | {r['verdict_ms']} | "
                         f"{r['median_sps']:.4g} | {'<br>'.join(r['findings']) or '—'} |")
        lines.append("")
    lines += ["The SPS gain is the issue's criterion; the ms/step saved is the better-conditioned one for a fix "
              "that removes most of the step (its gain grows without bound as the step shrinks). A gain within "
              "the baseline's run-to-run spread on both sides is *below noise*, not judged.", "",
              "Command: `python3 scripts/gpu/probe_validate.py --out DIR` (method: the script's docstring)."]
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
    ap.add_argument("--base-fix", default="", help="comma list applied to the baseline and every variant "
                    "(one pass; default: two passes, none and then env_loop)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=100.0, help="measuring time, all passes (rounds stop past it)")
    ap.add_argument("--run-timeout-s", type=float, default=120.0)
    ap.add_argument("--subprocess", action="store_true", help="measure each run in a fresh process")
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
    fixes = [f for f in (a.fixes or ",".join(FIXES)).split(",") if f]
    if a.base_fix:
        base = tuple(f for f in a.base_fix.split(",") if f)
        plan = [(base, [f for f in fixes if f not in base], 1.0)]
    else:
        # pass 2: with the per-env loop (which dominates the step) fixed, the other patterns are a larger
        # share of a shorter step, so their gains rise above the run-to-run noise
        plan = [((), fixes, 0.55)]
        rest = [f for f in fixes if f != "env_loop"]
        if "env_loop" in fixes and rest:
            plan.append((("env_loop",), rest, 0.45))
    passes = []
    try:
        check_script(a)
        measure = Measure(a)
        for base, todo, share in plan:
            passes.append(validate(a, profile, a.out, todo, base, measure, budget_s=a.budget_s * share))
            # written after every pass: a later failure or a kill keeps what is done
            (a.out / "validation.json").write_text(json.dumps(passes, indent=1) + "\n")
            (a.out / "validation.md").write_text(validation_markdown(passes) + "\n")
    except Exception as e:  # report, keep the passes done, exit non-zero
        import traceback

        detail = e if isinstance(e, (RuntimeError, subprocess.TimeoutExpired)) else traceback.format_exc()
        log(f"VALIDATION FAILED: {detail}")
        status = 1
        (a.out / "validation-error.txt").write_text(f"{detail}\n")
    for v in passes:
        log(f"baseline {'+'.join(v['base_fix']) or 'none fixed'}: median SPS {v['baseline_median_sps']:.4g}, "
            f"spread {v['baseline_noise'] * 100:.1f}%")
        for r in v["rows"]:
            p = "—" if r["predicted_gain"] is None else f"{r['predicted_gain'] * 100:+.1f}%"
            log(f"  {r['fix']:14s} gain predicted {p:>8s} measured {r['measured_gain'] * 100:+8.1f}%  "
                f"{r['verdict']:16s} | ms/step saved predicted {r['predicted_saved_ms'] or 0:.4g} "
                f"measured {r['measured_saved_ms']:.4g}  {r['verdict_ms']}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
