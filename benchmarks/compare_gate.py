"""How often ``perfkit compare`` raises a false alarm, and whether it catches a real slowdown, on this
machine: fresh-process profiles of unchanged ``examples/train.py`` and of the same script slowed by a
planted +10 % (``benchmarks/slowed_train.py``), interleaved so machine load drifts over all of them alike.

    python benchmarks/compare_gate.py run   --dir runs/compare-gate            # 10 A + 10 B + 5 slowed profiles
    python benchmarks/compare_gate.py score --dir runs/compare-gate [--json out.json]

``score`` runs the real ``perfkit compare`` command (``--fail-on-regression 5%``):

* default gate, one run per side: A_i vs B_i for the 10 pairs of unchanged runs (must pass);
* time gate, 5 runs per side: 10 comparisons of unchanged runs (A_i..A_i+4 vs B_i..B_i+4, indices mod 10;
  overlapping windows, so not 10 independent trials), which must pass; and the same 10 windows of A
  against the 5 slowed runs, which must fail on a time metric.

It is a benchmark, not a test: it prints the rates and never asserts.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
N_PAIRS, N_SLOW, PER_SIDE = 10, 5, 5


def _profile(out: pathlib.Path, script: pathlib.Path, args: list[str]) -> None:
    if out.exists():  # an interrupted `run` resumes
        return
    cmd = [sys.executable, "-m", "perfkit", "profile", "-q", "-o", str(out), str(script), *args]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)


def run(d: pathlib.Path, iterations: int, slowdown: float) -> None:
    d.mkdir(parents=True, exist_ok=True)
    train = ["--iterations", str(iterations)]
    for i in range(N_PAIRS):
        _profile(d / f"a{i}.json", ROOT / "examples" / "train.py", train)
        _profile(d / f"b{i}.json", ROOT / "examples" / "train.py", train)
        if i < N_SLOW:
            _profile(d / f"s{i}.json", ROOT / "benchmarks" / "slowed_train.py", ["--slowdown", str(slowdown), *train])
        print(f"round {i + 1}/{N_PAIRS} done", flush=True)


def _compare(base: list[pathlib.Path], new: list[pathlib.Path]) -> tuple[bool, str]:
    """Whether ``perfkit compare --fail-on-regression 5%`` fails BASE -> NEW, and its regressions."""
    with tempfile.TemporaryDirectory() as tmp:
        sides = []
        for name, paths in (("base", base), ("new", new)):
            (pathlib.Path(tmp) / name).mkdir()
            for p in paths:
                shutil.copy(p, pathlib.Path(tmp) / name / p.name)
            sides.append(str(pathlib.Path(tmp) / name / "*.json") if len(paths) > 1 else str(pathlib.Path(tmp) / name / paths[0].name))
        r = subprocess.run([sys.executable, "-m", "perfkit", "compare", *sides, "--fail-on-regression", "5%",
                            "--format", "json"], capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 1):
        raise SystemExit(f"perfkit compare failed (rc {r.returncode}): {r.stderr}")
    return r.returncode == 1, "; ".join(json.loads(r.stdout)["regressions"])


def score(d: pathlib.Path) -> dict:
    a = [d / f"a{i}.json" for i in range(N_PAIRS)]
    b = [d / f"b{i}.json" for i in range(N_PAIRS)]
    s = [d / f"s{i}.json" for i in range(N_SLOW)]
    window = lambda xs, i: [xs[(i + k) % len(xs)] for k in range(PER_SIDE)]  # noqa: E731
    trials = {
        "unchanged, 1 run per side (default gate)": [_compare([a[i]], [b[i]]) for i in range(N_PAIRS)],
        f"unchanged, {PER_SIDE} runs per side (time gate)": [_compare(window(a, i), window(b, i)) for i in range(N_PAIRS)],
        f"+slowdown, {PER_SIDE} runs per side (time gate)": [_compare(window(a, i), s) for i in range(N_PAIRS)],
    }
    out = {}
    for name, results in trials.items():
        failed = sum(f for f, _ in results)
        out[name] = {"failed": failed, "of": len(results), "regressions": [why for f, why in results if f]}
        print(f"{name}: {failed}/{len(results)} failed")
        for why in out[name]["regressions"]:
            print(f"    {why}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["run", "score"])
    ap.add_argument("--dir", default="runs/compare-gate", type=pathlib.Path)
    ap.add_argument("--iterations", type=int, default=12, help="examples/train.py --iterations per profile")
    ap.add_argument("--slowdown", type=float, default=0.10)
    ap.add_argument("--json", default=None, help="write the rates here")
    a = ap.parse_args()
    if a.phase == "run":
        run(a.dir, a.iterations, a.slowdown)
    else:
        res = score(a.dir)
        if a.json:
            pathlib.Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
