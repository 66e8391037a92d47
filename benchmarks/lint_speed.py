"""Speed benchmark for ``perfkit lint`` (not a test): lines/s on a large tree, side by side with
``flake8 --select=TOR`` (TorchFix) on exactly the same files.

    python benchmarks/lint_speed.py --real            # the RL codebases benchmarks/lint_real/run.py fetched
    python benchmarks/lint_speed.py                   # the installed torch and mujoco_warp sources
    python benchmarks/lint_speed.py --tree src/ --out reports/lint-speed
    python benchmarks/lint_speed.py --max-files 400   # a quicker, deterministic sample

perfkit lint runs once over all the files (one project: its hot paths cross files).

Both tools run as subprocesses on one explicit file list; wall time and the children's CPU time
are measured. flake8 uses its default parallelism (``-j auto``) unless ``--flake8-jobs`` says
otherwise; perfkit lint is one process. Needs ``pip install torchfix flake8`` for the comparison
(otherwise only perfkit is measured). Writes lint_speed.json and lint_speed.md under ``--out``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time


def real_trees() -> list:
    """The unpacked releases of benchmarks/lint_real (run ``python benchmarks/lint_real/run.py fetch`` first)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lint_real"))
    import run as lint_real  # benchmarks/lint_real/run.py

    trees = [lint_real.source_dir(c) for c in lint_real.load_codebases()]
    missing = [t for t in trees if not os.path.isdir(t)]
    if missing:
        raise SystemExit(f"not fetched: {missing}; run `python benchmarks/lint_real/run.py fetch`")
    return trees


def default_trees() -> list:
    import importlib.util

    out = []
    for name in ("torch", "mujoco_warp"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            out.append(list(spec.submodule_search_locations)[0])
    return out


def python_files(trees, max_files=None) -> list:
    files = []
    for tree in trees:
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    if max_files and len(files) > max_files:
        step = len(files) / max_files
        files = [files[int(i * step)] for i in range(max_files)]
    return files


def count_lines(files) -> int:
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            n += fh.read().count(b"\n")
    return n


def timed(cmd) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


def run_perfkit(files) -> dict:
    r = timed([sys.executable, "-m", "perfkit", "lint", "--format", "json", "--exit-zero", *files])
    if r["returncode"] != 0:
        raise SystemExit(f"perfkit lint failed ({r['returncode']}):\n{r['stderr'][-2000:]}")
    found = [d for d in json.loads(r["stdout"]) if d["rule"]]
    r["findings"] = len(found)
    r["by_rule"] = dict(sorted(collections.Counter(d["rule"] for d in found).items()))
    r["skipped_files"] = r["stderr"].count("cannot lint")
    return r


def run_flake8(files, jobs) -> dict | None:
    if shutil.which("flake8") is None:
        return None
    version = subprocess.run(["flake8", "--version"], capture_output=True, text=True).stdout.strip()
    if "TorchFix" not in version:
        return None
    r = timed(["flake8", "--select=TOR", f"--jobs={jobs}", "--exit-zero", *files])
    codes = re.findall(r":\d+:\d+: (TOR\d+)", r["stdout"])
    r["findings"] = len(codes)
    r["by_rule"] = dict(sorted(collections.Counter(codes).items()))
    r["version"] = version.splitlines()[0]
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", help="directory to lint (repeatable); default: torch + mujoco_warp")
    ap.add_argument("--real", action="store_true", help="the fetched RL codebases of benchmarks/lint_real")
    ap.add_argument("--max-files", type=int, default=None, help="lint an evenly spaced sample of this many files")
    ap.add_argument("--flake8-jobs", default="auto")
    ap.add_argument("--skip-flake8", action="store_true")
    ap.add_argument("--out", default=None, help="directory for lint_speed.json / lint_speed.md")
    args = ap.parse_args(argv)

    trees = args.tree or (real_trees() if args.real else default_trees())
    files = python_files(trees, args.max_files)
    if not files:
        raise SystemExit(f"no Python files under {trees}")
    lines = count_lines(files)
    print(f"{len(files)} files, {lines} lines under {', '.join(trees)}", flush=True)

    pk = run_perfkit(files)
    print(f"perfkit lint: {pk['wall_s']:.1f} s wall, {pk['cpu_s']:.1f} s CPU, {lines / pk['wall_s']:,.0f} lines/s, "
          f"{pk['findings']} findings {pk['by_rule']}", flush=True)
    fl = None if args.skip_flake8 else run_flake8(files, args.flake8_jobs)
    if fl:
        print(f"flake8 --select=TOR ({fl['version']}, -j {args.flake8_jobs}): {fl['wall_s']:.1f} s wall, "
              f"{fl['cpu_s']:.1f} s CPU, {lines / fl['wall_s']:,.0f} lines/s, {fl['findings']} findings "
              f"{fl['by_rule']}", flush=True)
        print(f"speed-up: {fl['wall_s'] / pk['wall_s']:.1f}x wall, {fl['cpu_s'] / pk['cpu_s']:.1f}x CPU", flush=True)
    elif not args.skip_flake8:
        print("flake8 with TorchFix not installed (pip install torchfix flake8): perfkit measured alone")

    result = {
        "trees": trees, "files": len(files), "lines": lines, "cpus": os.cpu_count(), "python": sys.version.split()[0],
        "perfkit": {k: v for k, v in pk.items() if k not in ("stdout", "stderr")},
        "flake8_tor": None if not fl else {k: v for k, v in fl.items() if k not in ("stdout", "stderr")},
    }
    result["perfkit"]["lines_per_s"] = lines / pk["wall_s"]
    if fl:
        result["flake8_tor"]["lines_per_s"] = lines / fl["wall_s"]
        result["speedup_wall"] = fl["wall_s"] / pk["wall_s"]
        result["speedup_cpu"] = fl["cpu_s"] / pk["cpu_s"]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "lint_speed.json"), "w") as fh:
            json.dump(result, fh, indent=1)
        md = ["# perfkit lint speed", "", f"`python benchmarks/lint_speed.py {' '.join(argv or sys.argv[1:])}`", "",
              f"{len(files)} files, {lines:,} lines ({', '.join(trees)}); {os.cpu_count()} CPUs", "",
              "| tool | wall s | CPU s | lines/s (wall) | findings |", "|---|---|---|---|---|",
              f"| perfkit lint | {pk['wall_s']:.1f} | {pk['cpu_s']:.1f} | {lines / pk['wall_s']:,.0f} | "
              f"{pk['findings']} |"]
        if fl:
            md.append(f"| flake8 --select=TOR (-j {args.flake8_jobs}) | {fl['wall_s']:.1f} | {fl['cpu_s']:.1f} | "
                      f"{lines / fl['wall_s']:,.0f} | {fl['findings']} |")
            md += ["", f"Speed-up: {result['speedup_wall']:.1f}x wall, {result['speedup_cpu']:.1f}x CPU."]
        md += ["", f"perfkit findings by rule: {pk['by_rule']}"]
        if fl:
            md.append(f"TorchFix findings by rule: {fl['by_rule']}")
        with open(os.path.join(args.out, "lint_speed.md"), "w") as fh:
            fh.write("\n".join(md) + "\n")
    return result


if __name__ == "__main__":
    main()
