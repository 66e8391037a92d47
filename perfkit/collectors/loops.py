"""Per-env Python loops: lines that run about ``num_envs`` times per step.

On a few *sampled* steps a line tracer (``sys.settrace``) counts line events in user code only: the
global trace function returns no local tracer for library frames, and the user frames already on the
stack when sampling starts (the training loop around ``env.step``) get one set directly. Between
samples no tracer runs at all. A line executed at least ``num_envs / 2`` times per sampled step (with
``num_envs >= 8``) is hot; hot lines are reported at the header of the outermost enclosing loop whose
header is hot itself (``for i in range(self.num_envs):``), one ``loop`` finding per loop.
"""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from types import CodeType, FrameType

from perfkit.collectors.sites import is_program_file
from perfkit.collectors.hub import tls

MIN_ENVS = 8
FIX = "replace the per-env Python loop with one batched tensor op over all envs (masks, torch.where, index_put_)"


class LineSampler:
    def __init__(self) -> None:
        self.counts: dict[tuple[CodeType, int], list] = {}  # (code, line) -> [n, {segment: n}]
        self.calls: dict[CodeType, int] = {}  # user code objects entered while sampling
        self.steps = 0
        self.skipped_reason: str | None = None
        self._frames: list[FrameType] = []
        self._on = False

    def _local(self, frame, event, arg):
        if event == "line":
            key = (frame.f_code, frame.f_lineno)
            c = self.counts.get(key)
            if c is None:
                c = self.counts[key] = [0, {}]
            c[0] += 1
            st = tls.stack
            seg = st[-1] if st else "other"
            c[1][seg] = c[1].get(seg, 0) + 1
        return self._local

    def _global(self, frame, event, arg):
        code = frame.f_code
        if is_program_file(code.co_filename):
            self.calls[code] = self.calls.get(code, 0) + 1
            return self._local
        return None

    def start(self, frame: FrameType | None) -> bool:
        if sys.gettrace() is not None:  # a debugger / coverage owns the tracer: leave it alone
            self.skipped_reason = "another tracer (debugger or coverage) was active"
            return False
        sys.settrace(self._global)
        f = frame
        while f is not None:
            if is_program_file(f.f_code.co_filename):
                f.f_trace = self._local
                f.f_trace_lines = True
                self._frames.append(f)
            f = f.f_back
        self._on = True
        return True

    def stop(self) -> None:
        if not self._on:
            return
        sys.settrace(None)
        for f in self._frames:
            f.f_trace = None
        self._frames.clear()
        self._on = False
        self.steps += 1


@lru_cache(maxsize=256)
def _loops_of(filename: str) -> tuple[tuple[int, int, int, str, int], ...]:
    """(first line, last line, header line, kind, first body line) of every loop / comprehension in a file."""
    try:
        with open(filename, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            kind = "while-loop over envs" if isinstance(node, ast.While) else "for-loop over envs"
            out.append((node.lineno, node.end_lineno or node.lineno, node.lineno, kind, node.body[0].lineno))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            out.append((node.lineno, node.end_lineno or node.lineno, node.lineno, "comprehension over envs", node.lineno))
    return tuple(out)


def hot_loops(counts: dict, steps: int, num_envs: int | None, calls: dict | None = None) -> list[dict]:
    """Loop sites from sampled line counts: ``{filename, line, function, kind, per_step, segment, span}``.

    ``per_step`` is iterations per step: a loop header runs once per iteration plus once per entry, so
    the entries (calls of the function that holds the loop, when the sampler saw them) are taken off."""
    calls_by_line: dict[tuple[str, int], float] = {}
    for (code, line), _ in counts.items():
        # a frame already running when sampling began (the training loop itself) was not seen entering:
        # its loops are taken to be entered once per step
        c = (calls or {}).get(code, 0) / steps or 1.0
        calls_by_line[(code.co_filename, line)] = calls_by_line.get((code.co_filename, line), 0) + c
    if not steps or not num_envs or num_envs < MIN_ENVS:
        return []
    threshold = num_envs / 2
    per_line: dict[tuple[str, int], tuple[float, str, dict]] = {}
    for (code, line), (n, segs) in counts.items():
        key = (code.co_filename, line)
        prev = per_line.get(key)
        total = n + (prev[0] * steps if prev else 0)
        merged = dict(prev[2]) if prev else {}
        for s, k in segs.items():
            merged[s] = merged.get(s, 0) + k
        per_line[key] = (total / steps, code.co_name, merged)
    hot = {k: v for k, v in per_line.items() if v[0] >= threshold}
    found: dict[tuple[str, int], dict] = {}
    for (fn, line), (rate, func, segs) in hot.items():
        loops = [lp for lp in _loops_of(fn) if lp[0] <= line <= lp[1]]
        hot_headers = [lp for lp in loops if (fn, lp[2]) in hot]
        if hot_headers:
            outer = min(hot_headers, key=lambda lp: (lp[0], -lp[1]))
        elif loops:
            outer = max(loops, key=lambda lp: lp[0])  # innermost loop around the line
        else:
            outer = (line, line, line, "line run once per env", line)
        key = (fn, outer[2])
        head = hot.get(key, (rate,))[0]
        entries = calls_by_line.get(key, 0.0) if outer[3] != "comprehension over envs" else 0.0
        iters = head - entries if head - entries > 0 else head
        cur = found.get(key)
        if cur is None:
            seg = max(segs, key=segs.get) if segs else "other"
            found[key] = {"filename": fn, "line": outer[2], "function": func, "kind": outer[3],
                          "per_step": iters, "segment": seg, "lines": 1, "span": (outer[0], outer[1])}
        else:
            cur["lines"] += 1
    return sorted(found.values(), key=lambda d: -d["per_step"])
