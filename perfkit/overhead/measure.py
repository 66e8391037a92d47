"""What perfkit costs a whole program: the same script run plainly, under ``perfkit profile`` and
under ``torch.profiler``, each run a fresh process, the arms interleaved over rounds.

An *arm* is one way of running the target:

* ``plain``: ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``);
* ``perfkit``: ``python -m perfkit profile -q -o RECORD [PROFILE_ARGS] SCRIPT ARGS`` (the record is
  written, as a user's run writes it; its cost is part of the arm's wall time);
* ``torch-profiler``: ``python -m perfkit.overhead.profiler_arm SCRIPT ARGS``: the script as
  ``__main__`` inside ``torch.profiler.profile(activities=[CPU, CUDA when present], with_stack=True)``
  over the whole run, the peer a user would otherwise reach for.

Every round runs each of its arms once; the order rotates by round (ABC, BCA, CAB, ...) so that
drift (thermal, clocks, other processes) and "first run after a pause" effects land on every arm
alike. The metric is read from each run's own output (default: the last ``SPS: <float>`` line: the
script times its steady state itself, so start-up is not in it); each run's wall time (process
start to exit, measured here) is kept beside it. Per round, each arm's metric over plain's metric is
its *ratio* (1.0: as fast as plain; 0.97: 3 % slower); the figure is the median of the per-round
ratios, and the *added wall time* is the arm's median wall time minus plain's. A run that exits
non-zero, times out or prints no metric is a failure: it is listed with the last lines of its stderr
and left out of the ratios (its round's other ratios still count).

Everything here returns plain data (dicts and lists of str / float / int / None): the
``perfkit overhead`` command, ``scripts/gpu/overhead.py`` and ``scripts/gpu/stacks.py`` are built on
:func:`measure`, :func:`table` and :func:`markdown`.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from perfkit.student_t import t_quantile

SCHEMA = "perfkit.overhead/1"
ARMS = ("plain", "perfkit", "torch-profiler")
DEFAULT_METRIC = r"^SPS: ([-+0-9.,eE]+)\s*$"
PROFILER_ARM_MODULE = "perfkit.overhead.profiler_arm"
TAIL_LINES = 12
_PROFILER_LINE = re.compile(r"^torch\.profiler: (-?\d+) events; run ([0-9.]+) s, trace processing ([0-9.]+) s", re.M)


class OverheadError(ValueError):
    """Bad settings for a measurement (an unknown arm, no plain arm, a metric regex without a group)."""


@dataclass
class Target:
    """What to run: a script path (or a module name with ``module=True``) and its arguments."""

    target: str
    args: list[str] = field(default_factory=list)
    module: bool = False

    def argv(self, args: Sequence[str] | None = None) -> list[str]:
        """``[SCRIPT, *args]`` or ``["-m", MODULE, *args]``."""
        rest = list(self.args if args is None else args)
        return (["-m", self.target] if self.module else [self.target]) + rest

    def describe(self) -> str:
        return shlex.join(self.argv())


# ------------------------------------------------------------------------------------------ settings


def check_arms(arms: Sequence[str]) -> list[str]:
    """``arms`` as a list, or OverheadError: each known, none twice, ``plain`` among them, and at least
    one other (the ratios are to plain)."""
    arms = [a.strip() for a in arms if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise OverheadError(f"unknown arm {unknown[0]!r} (the arms are {', '.join(ARMS)})")
    if len(set(arms)) != len(arms):
        raise OverheadError(f"an arm is named twice in {','.join(arms)}")
    if "plain" not in arms:
        raise OverheadError("the arms must include plain (every ratio is to the plain run)")
    if len(arms) < 2:
        raise OverheadError("give plain and at least one other arm (perfkit, torch-profiler)")
    return arms


def compile_metric(regex: str | None) -> re.Pattern | None:
    """The metric's pattern (multi-line: ``^``/``$`` match at each line), or OverheadError when it does
    not compile or has no group (its first group is the number). ``None``: wall time only."""
    if regex is None:
        return None
    try:
        pat = re.compile(regex, re.M)
    except re.error as e:
        raise OverheadError(f"the metric regex {regex!r} does not compile: {e}") from None
    if pat.groups < 1:
        raise OverheadError(f"the metric regex {regex!r} has no group: put the number in ( )")
    return pat


def parse_metric(text: str, pattern: re.Pattern) -> float | None:
    """The number in the last match of ``pattern`` in ``text`` (thousands separators ignored), or None."""
    last = None
    for m in pattern.finditer(text):
        last = m
    if last is None or last.group(1) is None:
        return None
    try:
        return float(last.group(1).replace(",", "").replace("_", ""))
    except ValueError:
        return None


def rotation(arms: Sequence[str], index: int) -> list[str]:
    """The order of round ``index`` (0-based): ``arms`` rotated left by ``index``."""
    k = index % len(arms)
    return list(arms[k:]) + list(arms[:k])


def arms_of_round(arms: Sequence[str], index: int, rounds: int, arm_rounds: dict[str, int] | None) -> list[str]:
    """The arms that run in round ``index`` (0-based) of ``rounds``: every arm, except that an arm with
    ``arm_rounds[arm] = n`` runs only in the *last* n rounds (so a time budget that cuts rounds short
    drops it first, and the plain-vs-perfkit rounds are complete before it runs)."""
    out = []
    for a in arms:
        n = (arm_rounds or {}).get(a)
        if n is None or index >= rounds - n:
            out.append(a)
    return out


def arm_command(arm: str, target: Target, *, python: str | None = None, record: str | os.PathLike | None = None,
                profile_args: Sequence[str] = (), args: Sequence[str] | None = None) -> list[str]:
    """The command line of one run of ``arm`` (``args`` replaces the target's arguments)."""
    py = python or sys.executable
    argv = target.argv(args)
    if arm == "plain":
        return [py, *argv]
    if arm == "perfkit":
        if record is None:
            raise ValueError("a perfkit run needs a record path")
        return [py, "-m", "perfkit", "profile", "-q", "-o", str(record), *profile_args, *argv]
    if arm == "torch-profiler":
        return [py, "-m", PROFILER_ARM_MODULE, *argv]
    raise ValueError(f"unknown arm {arm!r}")


# ------------------------------------------------------------------------------------------ one run


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        p.kill()


class _LineTimes:
    """Copies a child's stdout pipe to a file, noting when its first and last line arrived (seconds
    after ``t0``): with the child's stdout unbuffered, the wall time splits into the start-up before the
    program's first line, its run, and its end after the last one."""

    def __init__(self, pipe: Any, out: Any, t0: float):
        import threading

        self.first: float | None = None
        self.last: float | None = None
        self._pipe, self._out, self._t0 = pipe, out, t0
        self._thread = threading.Thread(target=self._copy, name="perfkit-overhead-stdout", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        for line in iter(self._pipe.readline, b""):
            t = time.perf_counter() - self._t0
            if self.first is None:
                self.first = t
            self.last = t
            self._out.write(line)
        self._pipe.close()

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)  # (a detached grandchild could hold the pipe open: do not wait on it)


def run_once(cmd: Sequence[str], *, name: str, log_dir: str | os.PathLike, metric: re.Pattern | None,
             env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
             timeout: float | None = None, line_times: bool = False) -> dict[str, Any]:
    """Run ``cmd`` in its own process group (killed whole past ``timeout`` seconds, or when this
    process is interrupted); stdout and stderr go to ``log_dir/NAME.out`` / ``NAME.err``. Returns the
    run: exit status, wall time, the metric (``metric``'s last match in stdout), and for a failure its
    reason and the last lines of its stderr. ``line_times``: the child's stdout is unbuffered
    (``PYTHONUNBUFFERED``) and read through a pipe, and the run also has ``first_line_s`` /
    ``last_line_s``: when its first and last line of stdout came (None: it printed none)."""
    logs = Path(log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    out_f, err_f = logs / f"{name}.out", logs / f"{name}.err"
    timed_out = False
    if line_times:
        env = {**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"}
    lines = None
    with open(out_f, "wb") as fo, open(err_f, "wb") as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE if line_times else fo, stderr=fe,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        if line_times:
            lines = _LineTimes(p.stdout, fo, t0)
        try:
            rc = p.wait(timeout=timeout if timeout else None)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(p)
            rc = p.wait()
        except BaseException:  # Ctrl-C here: the child must not outlive us
            _kill_group(p)
            p.wait()
            raise
        wall = time.perf_counter() - t0
        if lines is not None:
            lines.join()  # the pipe's end: every process of the group holding it has exited
    stdout = out_f.read_text(errors="replace")
    stderr = err_f.read_text(errors="replace")
    value = parse_metric(stdout, metric) if metric is not None else None
    if timed_out:
        reason = f"timed out after {timeout:g} s"
    elif rc != 0:
        reason = f"exit {rc}" if rc > 0 else f"killed by signal {-rc}"
    elif metric is not None and value is None:
        reason = f"no line of its stdout matched {metric.pattern!r}"
    else:
        reason = None
    run: dict[str, Any] = {"name": name, "cmd": list(cmd), "rc": rc, "timed_out": timed_out, "wall_s": round(wall, 3),
                           "metric": value, "ok": reason is None, "reason": reason,
                           "stdout": str(out_f), "stderr": str(err_f)}
    if lines is not None:
        run["first_line_s"] = None if lines.first is None else round(lines.first, 3)
        run["last_line_s"] = None if lines.last is None else round(lines.last, 3)
    m = _PROFILER_LINE.search(stderr)
    if m:
        run["profiler"] = {"events": int(m.group(1)), "run_s": float(m.group(2)), "processing_s": float(m.group(3))}
    if reason is not None:
        run["stderr_tail"] = stderr.strip().splitlines()[-TAIL_LINES:]
    return run


# ------------------------------------------------------------------------------------------ the measurement


def describe_machine(env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
                     python: str | None = None, timeout: float = 120) -> dict[str, Any]:
    """``perfkit.machine.describe()`` as the runs see it: in a child with their interpreter and
    environment (this process never imports torch or starts CUDA)."""
    import json

    code = "import json\nfrom perfkit.machine import describe\nprint(json.dumps(describe()))"
    try:
        p = subprocess.run([python or sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, IndexError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def measure(target: Target, *, arms: Sequence[str] = ARMS, rounds: int = 5, arm_rounds: dict[str, int] | None = None,
            arm_args: dict[str, list[str]] | None = None, metric_regex: str | None = DEFAULT_METRIC,
            timeout: float | None = None, warmup_runs: int = 1, env: dict[str, str] | None = None,
            cwd: str | os.PathLike | None = None, log_dir: str | os.PathLike | None = None,
            profile_args: Sequence[str] = (), python: str | None = None, deadline: float | None = None,
            estimates: dict[str, float] | None = None, machine: bool = True, label: str | None = None,
            line_times: bool = False, on_run: Callable[[dict], None] | None = None, on_round: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Measure ``target`` in ``rounds`` interleaved rounds of ``arms``; the result as plain data.

    ``arm_rounds``: arms that run in fewer rounds (the last ones; see :func:`arms_of_round`).
    ``arm_args``: arguments that replace the target's for one arm (e.g. fewer iterations under
    torch.profiler); such an arm's ratio still compares its metric with the round's plain run, but its
    wall time is not comparable and no added wall time is given for it. ``metric_regex=None``:
    no metric; the ratio is then plain's wall time over the arm's. ``warmup_runs`` plain runs go
    first, untimed (they fill the caches every arm then finds warm: compiled kernels, the file cache).
    ``deadline`` (a ``time.perf_counter()`` value): no round starts that would end after it, by
    ``estimates`` (seconds per arm) until each arm has a wall time of its own; an arm limited by
    ``arm_rounds`` is dropped from such a round first. ``log_dir`` keeps every run's stdout/stderr (and
    the perfkit arm's record); without it they go to a temporary folder removed at the end.
    ``line_times``: each run's stdout is timed line by line (:func:`run_once`), and the summary splits
    each arm's wall time into its *start* (to the first line of stdout), *run* and *end* (after the
    last line): where an arm's added wall time goes.
    ``on_run(run)`` / ``on_round(result)`` are called after each run / round (write partial results
    there). A KeyboardInterrupt propagates after the running child is killed; the result object given
    to ``on_round`` so far holds what finished.
    """
    arms = check_arms(arms)
    pattern = compile_metric(metric_regex)
    if rounds < 1:
        raise OverheadError("rounds must be >= 1")
    for a, n in (arm_rounds or {}).items():
        if a not in arms or a == "plain":
            raise OverheadError(f"arm_rounds names {a!r}, which is not a non-plain arm of this measurement")
        if not 1 <= n <= rounds:
            raise OverheadError(f"{a} would run in {n} rounds; give 1..{rounds}")
    arm_args = {a: list(v) for a, v in (arm_args or {}).items()}
    tmp = None
    if log_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="perfkit-overhead-")
        logs = Path(tmp.name)
    else:
        logs = Path(log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    result: dict[str, Any] = {
        "schema": SCHEMA, "label": label, "target": target.describe(), "arms": arms, "rounds_requested": rounds,
        "arm_rounds": {a: (arm_rounds or {}).get(a, rounds) for a in arms},
        "arm_args": arm_args, "metric_regex": metric_regex, "metric_name": metric_name(metric_regex),
        "timeout_s": timeout, "profile_args": list(profile_args), "python": python or sys.executable,
        "cwd": str(cwd or os.getcwd()), "logs": None if tmp else str(logs),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": None, "warmup": [], "rounds": [], "stopped": None,
    }
    result["summary"] = summarize(result)

    def go(arm: str, name: str, round_no: int) -> dict:
        record = logs / f"{name}.json" if arm == "perfkit" else None
        cmd = arm_command(arm, target, python=python, record=record, profile_args=profile_args, args=arm_args.get(arm))
        run = run_once(cmd, name=name, log_dir=logs, metric=pattern, env=env, cwd=cwd, timeout=timeout,
                       line_times=line_times)
        run["arm"], run["round"] = arm, round_no
        if record is not None:
            run["self_estimate_s"] = self_estimate_s(record)
        if tmp is not None:
            run["stdout"] = run["stderr"] = None  # removed with the temporary folder
        if on_run is not None:
            on_run(run)
        return run

    try:
        for i in range(warmup_runs):
            r = go("plain", f"warmup{i + 1}-plain", 0)
            result["warmup"].append(r)
            if not r["ok"]:  # every arm would fail the same way: say so now, not after all the rounds
                result["stopped"] = f"the warm-up run failed ({r['reason']}); no round was run"
                return result
        if machine:  # after the warm-up (a run that cannot start needs no description), before the rounds
            result["machine"] = describe_machine(env, cwd, python)
        seen: dict[str, list[float]] = {}  # wall times of each arm's ok runs so far

        def cost(names: list[str]) -> float:
            """Seconds a round of ``names`` should take: each arm's longest run so far, else its estimate."""
            return sum(max(seen[a]) if seen.get(a) else (estimates or {}).get(a, 0.0) for a in names)

        for i in range(rounds):
            active = arms_of_round(arms, i, rounds, arm_rounds)
            dropped: list[str] = []
            if deadline is not None:
                limited = [a for a in active if (arm_rounds or {}).get(a, rounds) < rounds]
                while time.perf_counter() + cost(active) > deadline and limited:
                    a = limited.pop()
                    active.remove(a)
                    dropped.append(a)
                if time.perf_counter() + cost(active) > deadline:
                    result["stopped"] = (f"time budget: round {i + 1} ({', '.join(active)}, ~{cost(active):.0f} s) "
                                         f"would end past the deadline; {i} of {rounds} rounds ran")
                    break
            order = rotation(active, i)
            row: dict[str, Any] = {"round": i + 1, "order": order, "runs": {}}
            if dropped:
                row["dropped"] = {a: "time budget" for a in dropped}
            for arm in order:
                r = go(arm, f"r{i + 1}-{arm}", i + 1)
                row["runs"][arm] = r
                if r["ok"]:
                    seen.setdefault(arm, []).append(r["wall_s"])
            result["rounds"].append(row)
            result["summary"] = summarize(result)
            result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
            if on_round is not None:
                on_round(result)
    finally:
        result["summary"] = summarize(result)
        result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        if tmp is not None:
            tmp.cleanup()
    return result


def self_estimate_s(record: str | os.PathLike) -> float | None:
    """What the perfkit arm's record says perfkit added to the run (its ``self`` block: one-off costs and
    the plain steps' estimated cost), or None without a readable record (a failed run)."""
    from perfkit.record import RecordError, Run

    try:
        run = Run.load(record)
    except (RecordError, OSError):
        return None
    plain_steps = run.steps - len(run.sampling.get("steps") or [])
    return round(run.self.added_s(plain_steps), 6)


# ------------------------------------------------------------------------------------------ the figures


def metric_name(regex: str | None) -> str:
    if regex is None:
        return "wall"
    return "SPS" if regex == DEFAULT_METRIC else "metric"


def _paired_interval(diffs: Sequence[float]) -> dict[str, float] | None:
    """The per-round added walls (arm minus plain, same round) as a mean with its 95 % interval, and their
    median: the resolution of an interleaved A/B. Fresh processes' start-up spreads by seconds on a
    GPU machine (imports, kernel loading), so a cost of ~1 s is inside the interval of five rounds
    unless the rounds agree closely; None below two rounds."""
    n = len(diffs)
    if n < 2:
        return None
    mean = statistics.fmean(diffs)
    half = t_quantile(0.975, n - 1) * statistics.stdev(diffs) / n ** 0.5
    return {"median": statistics.median(diffs), "mean": mean, "low": mean - half, "high": mean + half, "rounds": n}


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _value(run: dict, wall_only: bool) -> float | None:
    """What a ratio compares: the metric (higher is better), or 1/wall time without one."""
    if not run or not run.get("ok"):
        return None
    if wall_only:
        return 1.0 / run["wall_s"] if run["wall_s"] > 0 else None
    return run.get("metric")


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per arm, from the rounds' own runs: runs made and ok, the median metric and wall time, the
    per-round ratios to plain (rounds where both ran ok), their median, the overhead (1 - median
    ratio, in %), and the added wall time (median wall minus plain's). Also every failure."""
    wall_only = result.get("metric_regex") is None
    arm_args = result.get("arm_args") or {}
    rows = result.get("rounds", [])
    plain_ok = [r["runs"]["plain"] for r in rows if r["runs"].get("plain", {}).get("ok")]
    plain_walls = [x["wall_s"] for x in plain_ok]
    plain_parts = _median_parts(plain_ok)
    arms: dict[str, Any] = {}
    for arm in result.get("arms", ARMS):
        runs = [r["runs"][arm] for r in rows if arm in r["runs"]]
        ok = [x for x in runs if x["ok"]]
        walls = [x["wall_s"] for x in ok]
        metrics = [x["metric"] for x in ok if x.get("metric") is not None]
        s: dict[str, Any] = {"runs": len(runs), "ok": len(ok),
                             "median_metric": _median(metrics), "median_wall_s": _median(walls)}
        parts = _median_parts(ok)
        if parts:  # line-timed runs: the median start, run and end of the wall time
            s["wall_parts_s"] = parts
        if arm != "plain":
            ratios, added = [], []
            for r in rows:
                a, p = r["runs"].get(arm), r["runs"].get("plain")
                va, vp = _value(a, wall_only), _value(p, wall_only)
                if va is not None and vp:
                    ratios.append({"round": r["round"], "ratio": va / vp})
                    added.append({"round": r["round"], "added_wall_s": a["wall_s"] - p["wall_s"]})
            med = _median([x["ratio"] for x in ratios])
            comparable = arm not in arm_args
            s.update({
                "ratios": ratios,
                "median_ratio": med,
                "overhead_pct": (1.0 - med) * 100.0 if med is not None else None,
                "wall_comparable": comparable,
                "added_wall_s": (s["median_wall_s"] - _median(plain_walls)
                                 if comparable and walls and plain_walls else None),
                "added_wall_per_round_s": added if comparable else [],
            })
            interval = _paired_interval([x["added_wall_s"] for x in added]) if comparable else None
            if interval is not None:  # the rounds' own differences: how finely this run resolves an added wall
                s["added_wall_paired_s"] = interval
            if comparable and plain_parts and s.get("wall_parts_s"):
                s["added_wall_parts_s"] = {k: s["wall_parts_s"][k] - plain_parts[k] for k in WALL_PARTS}
            estimates = [x["self_estimate_s"] for x in ok if x.get("self_estimate_s") is not None]
            if estimates:  # the perfkit arm's own account of its cost, against the measured added wall
                est = _median(estimates)
                s["self_estimate_s"] = est
                s["self_estimate_error"] = ((est - s["added_wall_s"]) / s["added_wall_s"]
                                            if s.get("added_wall_s") else None)
        arms[arm] = s
    failures = []
    for run in result.get("warmup", []):
        if not run["ok"]:
            failures.append(_failure(run))
    for r in rows:
        for arm in r["order"]:
            if not r["runs"][arm]["ok"]:
                failures.append(_failure(r["runs"][arm]))
    return {"arms": arms, "failures": failures, "rounds_run": len(rows)}


WALL_PARTS = ("start", "run", "end")  # a line-timed run's wall: before its first line of stdout, to its last, after


def _wall_parts(run: dict) -> dict[str, float] | None:
    """``{start, run, end}`` seconds of a line-timed run's wall time (None: not line-timed, or no line)."""
    first, last = run.get("first_line_s"), run.get("last_line_s")
    if first is None or last is None:
        return None
    return {"start": first, "run": last - first, "end": run["wall_s"] - last}


def _median_parts(runs: list[dict]) -> dict[str, float] | None:
    """The median of each of :data:`WALL_PARTS` over the line-timed ``runs`` (None: none is)."""
    parts = [p for p in map(_wall_parts, runs) if p is not None]
    return {k: _median([p[k] for p in parts]) for k in WALL_PARTS} if parts else None


def _failure(run: dict) -> dict:
    return {"round": run.get("round"), "arm": run.get("arm"), "reason": run["reason"],
            "stderr_tail": run.get("stderr_tail", []), "stdout": run.get("stdout"), "stderr": run.get("stderr")}


def check_gates(result: dict[str, Any], max_overhead: float | None = None,
                max_added_wall_s: float | None = None) -> list[str]:
    """What fails the gates: perfkit's median ratio below ``1 - max_overhead`` (a fraction: 0.03 for
    3 %), perfkit's added wall time above ``max_added_wall_s``. Each problem as a sentence."""
    pk = result["summary"]["arms"].get("perfkit")
    problems = []
    if max_overhead is not None:
        if pk is None or pk.get("median_ratio") is None:
            problems.append("--max-overhead: no perfkit/plain ratio was measured")
        elif pk["median_ratio"] < 1.0 - max_overhead - 1e-12:
            problems.append(f"perfkit's median {result['metric_name']} ratio to plain is {pk['median_ratio']:.4f}, "
                            f"below {1.0 - max_overhead:.4f} (--max-overhead {max_overhead * 100:g}%)")
    if max_added_wall_s is not None:
        if pk is None or pk.get("added_wall_s") is None:
            problems.append("--max-added-wall: perfkit's added wall time was not measured")
        elif pk["added_wall_s"] > max_added_wall_s:
            problems.append(f"perfkit adds {pk['added_wall_s']:.2f} s of wall time to a run, more than "
                            f"{max_added_wall_s:g} s (--max-added-wall)")
    return problems


# ------------------------------------------------------------------------------------------ rendering


def _num(v: float | None, spec: str = ",.1f") -> str:
    return "—" if v is None else format(v, spec)


def _metric_spec(result: dict) -> str:
    vals = [s["median_metric"] for s in result["summary"]["arms"].values() if s.get("median_metric") is not None]
    return ",.0f" if vals and min(abs(v) for v in vals) >= 100 else ",.4g"


def _per_round(result: dict) -> tuple[list[str], list[list[str]]]:
    arms = result["arms"]
    wall_only = result.get("metric_regex") is None
    name = result["metric_name"]
    spec = _metric_spec(result)
    others = [a for a in arms if a != "plain"]
    head = ["round", "order"]
    if not wall_only:
        head += [f"{a} {name}" for a in arms]
    head += [f"{a}/plain" for a in others] + [f"{a} wall s" for a in arms]
    rows = []
    for r in result["rounds"]:
        runs = r["runs"]
        ratio = {a: next((x["ratio"] for x in result["summary"]["arms"][a]["ratios"] if x["round"] == r["round"]), None)
                 for a in others}
        cells = [str(r["round"]), " ".join(r["order"])]
        if not wall_only:
            cells += [_cell(runs.get(a), lambda x: _num(x["metric"], spec)) for a in arms]
        cells += [_num(ratio[a], ".4f") if a in runs else "" for a in others]
        cells += [_cell(runs.get(a), lambda x: _num(x["wall_s"], ".1f")) for a in arms]
        rows.append(cells)
    return head, rows


def _cell(run: dict | None, fmt: Callable[[dict], str]) -> str:
    if run is None:
        return ""
    if not run["ok"]:
        return "failed"
    return fmt(run)


def _summary_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    wall_only = result.get("metric_regex") is None
    name = result["metric_name"]
    spec = _metric_spec(result)
    head = ["arm", "runs ok"] + ([] if wall_only else [f"median {name}"]) + [
        "median ratio to plain", "overhead", "median wall s", "added wall s"]
    rows = []
    for arm, s in result["summary"]["arms"].items():
        cells = [arm, f"{s['ok']}/{s['runs']}"]
        if not wall_only:
            cells.append(_num(s["median_metric"], spec))
        if arm == "plain":
            cells += ["1", "—", _num(s["median_wall_s"], ".1f"), "—"]
        else:
            added = s["added_wall_s"]
            cells += [_num(s["median_ratio"], ".4f"),
                      "—" if s["overhead_pct"] is None else f"{s['overhead_pct']:.1f} %",
                      _num(s["median_wall_s"], ".1f"),
                      ("n/a (other args)" if not s["wall_comparable"] else "—" if added is None else f"{added:+.1f}")]
        rows.append(cells)
    return head, rows


def _text_table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(head), *(line(r) for r in rows)]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _machine_words(result: dict) -> str:
    m = result.get("machine") or {}
    if not m or m.get("error"):
        return "an undescribed machine"
    parts = [str(m.get("device") or "cpu")]
    if m.get("cpu_count"):
        parts.append(f"{m['cpu_count']} CPU cores")
    for k, name in (("cuda", "CUDA"), ("torch", "torch"), ("python", "Python")):
        if m.get(k):
            parts.append(f"{name} {m[k]}")
    return ", ".join(parts)


def _how(result: dict) -> str:
    metric = ("each run's wall time (no metric: the ratio is plain's wall time over the arm's)"
              if result.get("metric_regex") is None else
              f"the last line of each run's own stdout matching `{result['metric_regex']}` (higher is better)")
    limited = [f"{a} in the last {n}" for a, n in result["arm_rounds"].items() if n < result["rounds_requested"]]
    other = [f"{a} runs `{shlex.join(v)}`" for a, v in (result.get("arm_args") or {}).items()]
    text = (f"{result['summary']['rounds_run']} of {result['rounds_requested']} rounds"
            + (f" ({'; '.join(limited)})" if limited else "")
            + f" on {_machine_words(result)}; each run a fresh process, the arms interleaved in an order that rotates "
              f"by round; the metric is {metric}; wall is the whole process, start to exit"
            + (f"; {len(result['warmup'])} untimed plain warm-up run(s) first" if result.get("warmup") else "") + ".")
    if other:
        text += " Other arguments: " + "; ".join(other) + " (its wall time is not compared)."
    return text


def _failure_lines(result: dict) -> list[str]:
    out = []
    for f in result["summary"]["failures"]:
        where = "warm-up" if f["round"] == 0 else f"round {f['round']}"
        out.append(f"{where} {f['arm']}: {f['reason']}")
        out += [f"    {ln}" for ln in f["stderr_tail"]]
    return out


def _self_estimate_line(result: dict[str, Any]) -> str:
    """perfkit's own account of its cost (the perfkit arm's records' self blocks) beside the measured one."""
    s = result["summary"]["arms"].get("perfkit") or {}
    est = s.get("self_estimate_s")
    if est is None:
        return ""
    measured, err = s.get("added_wall_s"), s.get("self_estimate_error")
    against = (f"; measured {measured:+.2f} s, the estimate {err:+.0%} off" if measured is not None and err is not None
               else "")
    pair = s.get("added_wall_paired_s")
    if pair is not None:
        inside = pair["low"] <= est <= pair["high"]
        against += (f"; of the rounds' own 95 % interval (the line above), "
                    f"the estimate lies {'inside' if inside else 'outside'} it"
                    + (" — this run cannot tell a cost of this size from none" if inside and pair["low"] <= 0 <= pair["high"]
                       else ""))
    return f"perfkit's own estimate (its records' self blocks, median): {est:+.2f} s added{against}"


def _paired_lines(result: dict[str, Any]) -> list[str]:
    """Each arm's added wall as the rounds' own differences: their mean, its 95 % interval and median."""
    out = []
    for arm, s in result["summary"]["arms"].items():
        p = s.get("added_wall_paired_s")
        if p is not None:
            out.append(f"{arm} added wall per round: mean {p['mean']:+.2f} s (95 % {p['low']:+.2f}..{p['high']:+.2f}), "
                       f"median {p['median']:+.2f} s, {p['rounds']} rounds")
    return out


def _wall_parts_lines(result: dict[str, Any]) -> list[str]:
    """Where each arm's wall time went (line-timed runs): start, run and end, and what each adds to plain's."""
    out = []
    for arm, s in result["summary"]["arms"].items():
        parts = s.get("wall_parts_s")
        if not parts:
            continue
        added = s.get("added_wall_parts_s")
        out.append(f"{arm} wall (median): " + ", ".join(
            f"{k} {parts[k]:.2f} s" + (f" ({added[k]:+.2f})" if added else "") for k in WALL_PARTS))
    if out:
        out.append("(start: to the program's first line of stdout; end: after its last line, the exit included)")
    return out


def table(result: dict[str, Any]) -> str:
    """The console rendering: what ran, the per-round table, the per-arm summary, the failures."""
    lines = [f"perfkit overhead: {result['target']}", _how(result), ""]
    head, rows = _per_round(result)
    lines += _text_table(head, rows) + [""]
    head, rows = _summary_rows(result)
    lines += _text_table(head, rows)
    paired = _paired_lines(result)
    if paired:
        lines += ["", *paired]
    own = _self_estimate_line(result)
    if own:
        lines += ["", own]
    parts = _wall_parts_lines(result)
    if parts:
        lines += ["", *parts]
    if result.get("stopped"):
        lines += ["", f"stopped early: {result['stopped']}"]
    fails = _failure_lines(result)
    if fails:
        lines += ["", f"failed runs ({len(result['summary']['failures'])}):", *fails]
    return "\n".join(lines) + "\n"


def markdown(result: dict[str, Any], heading: str = "#") -> str:
    """The Markdown rendering (``heading``: the level of its title, e.g. ``##`` inside a bigger report)."""
    title = result.get("label") or f"`{result['target']}`"
    lines = [f"{heading} perfkit overhead: {title}", "", f"`{result['target']}`", "", _how(result), ""]
    head, rows = _per_round(result)
    lines += _md_table(head, rows) + [""]
    head, rows = _summary_rows(result)
    lines += _md_table(head, rows) + [""]
    for arm, s in result["summary"]["arms"].items():
        if arm != "plain" and s["ratios"]:
            lines.append(f"* {arm}/plain per round: " + ", ".join(f"{x['ratio']:.4f}" for x in s["ratios"])
                         + ("; added wall per round: " + ", ".join(f"{x['added_wall_s']:+.1f} s" for x in s["added_wall_per_round_s"])
                            if s["added_wall_per_round_s"] else ""))
    lines += [f"* {ln}" for ln in _paired_lines(result)]
    own = _self_estimate_line(result)
    if own:
        lines.append(f"* {own}")
    lines += [f"* {ln}" for ln in _wall_parts_lines(result)]
    prof = [r["runs"]["torch-profiler"]["profiler"] for r in result["rounds"]
            if r["runs"].get("torch-profiler", {}).get("profiler")]
    if prof:
        lines.append("* torch.profiler: " + "; ".join(f"{p['events']:,} events, trace processing {p['processing_s']:.1f} s"
                                                      for p in prof))
    lines.append("")
    if result.get("stopped"):
        lines += [f"Stopped early: {result['stopped']}", ""]
    fails = _failure_lines(result)
    if fails:
        lines += ["Failed runs:", "", "```", *fails, "```", ""]
    return "\n".join(lines)
