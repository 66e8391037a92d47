"""Are the syncs a default run counts on whole periods (the sync gate) the syncs the runtime makes?

    python3 scripts/gpu/gated_counts.py --out DIR [--iterations 16]

A default CUDA run counts syncs on a few whole periods of the loop and pauses counting in between
(``perfkit/collectors/sync_gate.py``); ``--verify`` never pauses and has CUPTI count the runtime's own
syncs. For each loop (``examples/manager_env`` through rsl_rl's OnPolicyRunner at 4096 envs,
``examples/train_naive.py`` at 256 envs) this runs both, one after the other, and sets per site
("path:line") the gated run's syncs per step beside the runtime's (the ``--verify`` run's CUPTI counts,
over its window) and beside that run's own every-step count: sites the gated run missed, sites it
counted that the runtime never synced at, and each ratio. Two runs, so a data-dependent site (resets)
differs by its own noise; a fixed site must agree. Writes DIR/gated-counts.md and .json, and each run's
record and console output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfkit.profile.verify_agreement import record_rates
from perfkit.record import Run
from verify import profile_run  # scripts/gpu/verify.py (this script's folder is first on the path)

TOLERANCE = 0.05
LOOPS = (  # (name, script, its arguments without --iterations, perfkit's options)
    ("manager env 4096", "examples/manager_env/train_rsl_rl.py",
     ["--num-envs", "4096", "--num-steps", "24", "--device", "cuda", "--backend", "mjwarp"], ["--warmup-steps", "24"]),
    ("train_naive 256", "examples/train_naive.py", ["--num-envs", "256", "--backend", "mjwarp"], []),
)


def profile(name: str, script: str, args: list[str], options: list[str], verify: bool, out: Path,
            timeout: int) -> dict:
    stem = f"{name.replace(' ', '-')}-{'verify' if verify else 'gated'}"
    record = out / f"{stem}.json"
    code, seconds = profile_run([*(["--verify"] if verify else []), *options], script, args, record,
                                out / f"{stem}.txt", timeout)
    run: dict = {"exit": code, "seconds": seconds}
    if record.exists():
        raw = json.loads(record.read_text())
        extra = raw.get("extra") or {}
        run["rates"] = record_rates(Run.load(record).findings)
        run["sync_counting"] = extra.get("sync_counting")
        agreed = (extra.get("verify") or {}).get("agreement") or {}
        if agreed:
            read_agreement(run, agreed)
    return run


def read_agreement(run: dict, agreed: dict) -> None:
    """A ``--verify`` run's own per-site agreement, over its window: the runtime's syncs per step and the
    record's in the same steps (a one-off site, rsl_rl's first checkpoint save, reads the same in both
    there, but not against the run's whole-record rate)."""
    run["runtime"] = {s["site"]: s["runtime_per_step"] for s in agreed.get("sites") or []}
    run["window_record"] = {s["site"]: s["record_per_step"] for s in agreed.get("sites") or []}
    run["window"] = {k: agreed.get(k) for k in ("window", "steps", "runtime_per_step", "record_per_step", "ratio",
                                                 "sites_outside_tolerance")}


def compare(gated: dict[str, float], runtime: dict[str, float], every: dict[str, float],
            window: dict[str, float] | None = None) -> dict:
    """Per site: the gated run's rate (its whole record) against the runtime's (the verify run's window),
    beside the verify run's own count in that window (``window``) and over its whole record (``every``)."""
    sites = []
    for site in sorted(set(gated) | set(runtime), key=lambda s: (-runtime.get(s, 0.0), -gated.get(s, 0.0), s)):
        g, r = gated.get(site, 0.0), runtime.get(site, 0.0)
        row = {"site": site, "runtime": round(r, 4), "every_step": round(every.get(site, 0.0), 4),
               "gated": round(g, 4), "ratio": round(g / r, 4) if r else None}
        if window is not None:
            row["window_record"] = round(window.get(site, 0.0), 4)
        sites.append(row)
    g_total, r_total = sum(gated.values()), sum(runtime.values())
    return {"sites": sites, "gated_per_step": round(g_total, 4), "runtime_per_step": round(r_total, 4),
            "ratio": round(g_total / r_total, 4) if r_total else None,
            "missed": [s["site"] for s in sites if s["runtime"] and not s["gated"]],
            "false": [s["site"] for s in sites if s["gated"] and not s["runtime"]],
            "outside": [s["site"] for s in sites if s["ratio"] is not None and abs(s["ratio"] - 1) > TOLERANCE]}


def compare_row(row: dict) -> None:
    """A loop's comparison (:func:`compare`) from its two runs, when both left a record to compare."""
    gated, verify = row["gated"], row["verify"]
    if "rates" in gated and "runtime" in verify:
        row["compare"] = compare(gated["rates"], verify["runtime"], verify.get("rates", {}), verify.get("window_record"))


def write(out: Path, rows: list[dict], argv: list[str]) -> None:
    (out / "gated-counts.json").write_text(json.dumps(rows, indent=1))
    lines = ["# Gated sync counts against the runtime's", "", f"`python3 scripts/gpu/gated_counts.py {' '.join(argv)}`",
             "", "Per loop: a default run (syncs counted on whole periods) and a `--verify` run (every step counted, "
             "CUPTI counting the runtime's syncs over its window), one after the other. ratio = gated / runtime.", "",
             "| loop | gated syncs/step | runtime/step (verify run) | ratio | sites missed | sites false | sites outside ±5 % "
             "| counted steps (gated run) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        c, g = r.get("compare") or {}, (r["gated"].get("sync_counting") or {})
        lines.append(f"| {r['name']} | {c.get('gated_per_step')} | {c.get('runtime_per_step')} | {c.get('ratio')} | "
                     f"{len(c.get('missed', []))} | {len(c.get('false', []))} | {len(c.get('outside', []))} of "
                     f"{len(c.get('sites', []))} | {g.get('counted_steps')} of the run, paused {g.get('paused')}, "
                     f"{g.get('blocks')} blocks |")
    for r in rows:
        c, w = r.get("compare") or {}, r["verify"].get("window") or {}
        lines += ["", f"## {r['name']}: exit gated {r['gated']['exit']}, verify {r['verify']['exit']}", "",
                  f"The verify run's window: {w.get('window')}, {w.get('steps')} steps; there perfkit counted "
                  f"{w.get('record_per_step')} syncs/step and the runtime made {w.get('runtime_per_step')} (ratio "
                  f"{w.get('ratio')}, sites outside ±5 %: {w.get('sites_outside_tolerance')}). Per site: the runtime's "
                  "rate in that window; the verify run's own count in the same steps and over its whole record (a "
                  "one-off site reads lower over the whole record); the gated run's over its whole record.", "",
                  "| site | runtime/step | verify run, its window | verify run, whole record | gated | gated / runtime |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| `{s['site']}` | {s['runtime']} | {s.get('window_record', '—')} | {s['every_step']} | {s['gated']} "
                  f"| {s['ratio']} |" for s in c.get("sites", [])]
    (out / "gated-counts.md").write_text("\n".join(lines) + "\n")


def rerender(out: Path) -> list[dict]:
    """The rows of an earlier run in ``out``, the verify runs' agreement read again from their records."""
    rows = json.loads((out / "gated-counts.json").read_text())
    for row in rows:
        record = out / f"{row['name'].replace(' ', '-')}-verify.json"
        if record.exists():
            agreed = ((json.loads(record.read_text()).get("extra") or {}).get("verify") or {}).get("agreement") or {}
            if agreed:
                read_agreement(row["verify"], agreed)
        compare_row(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--timeout", type=int, default=200)
    ap.add_argument("--only", default=None, help="run only the loops whose name contains this")
    ap.add_argument("--rerender", action="store_true",
                    help="run nothing: rebuild DIR's tables from its gated-counts.json and the verify runs' records")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.rerender:
        rows = rerender(out)
        first = (out / "gated-counts.md").read_text().splitlines()[2]  # the run's own command line
        write(out, rows, first.strip("`").split()[2:])
        print((out / "gated-counts.md").read_text())
        return 0
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for name, script, args, options in LOOPS:
        if a.only and a.only not in name:
            continue
        args = [*args, "--iterations", str(a.iterations)]
        row = {"name": name, "script": script, "args": args}
        for arm, verify in (("gated", False), ("verify", True)):
            print(f"gated_counts: {name} {arm}", flush=True)
            row[arm] = profile(name, script, args, options, verify, out, a.timeout)
        compare_row(row)
        rows.append(row)
        write(out, rows, argv)
    print((out / "gated-counts.md").read_text())
    return 0 if all(r["gated"]["exit"] == 0 and r["verify"]["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
