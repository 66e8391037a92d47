"""Per-env Python loops: loops one entry of which iterates about ``num_envs`` times.

On the *sampled* steps a line tracer (``sys.settrace``) counts line events in program code (the
user's and libraries', not the runtime's): the global trace function returns no local tracer for
runtime frames, and the program frames already on the stack when sampling starts (the training loop
around ``env.step``) get one set directly. Between samples no tracer runs at all. Besides the line
counts it counts the *entries* into each loop (a header line reached from outside the loop's lines),
so that the iterations of one entry are known: a loop is per-env when one entry iterates at least
``num_envs / 2`` times (``num_envs >= 8``) — evidence that it scales with the batch, which a
library's short loop that merely runs often does not give. One ``loop`` finding per outermost such loop.
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
        self.calls: dict[CodeType, int] = {}  # program code objects entered while sampling
        self.entries: dict[tuple[CodeType, int], int] = {}  # (code, loop header line) -> entries into the loop
        self.steps = 0
        self._heads: dict[CodeType, dict[int, tuple[int, int]]] = {}  # code -> {header line: (first, last line)}
        self._last: dict[int, int] = {}  # id(frame) -> the last line it ran
        self.skipped_reason: str | None = None
        self._frames: list[FrameType] = []
        self._on = False

    def _local(self, frame, event, arg):
        if event == "line":
            code, line = frame.f_code, frame.f_lineno
            key = (code, line)
            c = self.counts.get(key)
            if c is None:
                c = self.counts[key] = [0, {}]
            c[0] += 1
            st = tls.stack
            seg = st[-1] if st else "other"
            c[1][seg] = c[1].get(seg, 0) + 1
            heads = self._heads.get(code)
            if heads is None:
                heads = self._heads[code] = _loop_heads(code)
            if heads:
                fid = id(frame)
                span = heads.get(line)
                if span is not None:
                    prev = self._last.get(fid)
                    if prev is None or not span[0] <= prev <= span[1]:
                        self.entries[key] = self.entries.get(key, 0) + 1
                self._last[fid] = line
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
        self._last.clear()
        self._on = False
        self.steps += 1


def _loop_heads(code: CodeType) -> dict[int, tuple[int, int]]:
    """``{header line: (first line, last line)}`` of the loops whose header lies in ``code``'s lines."""
    first = code.co_firstlineno
    try:
        last = max((ln for _, _, ln in code.co_lines() if ln is not None), default=first)
    except Exception:  # pragma: no cover
        last = first
    return {h: (lo, hi) for lo, hi, h, _, _ in _loops_of(code.co_filename) if first <= h <= last}


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


def hot_loops(counts: dict, steps: int, num_envs: int | None, entries: dict | None = None) -> list[dict]:
    """Per-env loops from sampled line counts and loop entries: ``{filename, line, function, kind,
    per_step, segment, span}`` (see module doc). A loop header runs once per entry and once per
    iteration, so iterations = header events - entries; ``per_step`` is iterations per step."""
    if not steps or not num_envs or num_envs < MIN_ENVS:
        return []
    entries = entries or {}
    threshold = num_envs / 2
    loops: dict[tuple[str, int], list] = {}  # (file, header) -> [iterations, entries, {segment: n}, function]
    for (code, line), (n, segs) in counts.items():
        e = entries.get((code, line))
        if e is None:
            continue  # not a loop header (or never entered from outside while sampled)
        key = (code.co_filename, line)
        acc = loops.setdefault(key, [0, 0, {}, code.co_name])
        acc[0] += n - e
        acc[1] += e
        for sg, k in segs.items():
            acc[2][sg] = acc[2].get(sg, 0) + k
        if not code.co_name.startswith("<"):
            acc[3] = code.co_name
    hot: list[tuple] = []
    for (fn, header), (iters, ents, segs, func) in loops.items():
        per_step = iters / steps
        if ents <= 0 or per_step < threshold or iters / ents < threshold:
            continue
        span = next(((lo, hi, kind) for lo, hi, h, kind, _ in _loops_of(fn) if h == header), (header, header, "for-loop over envs"))
        hot.append((fn, header, span, per_step, segs, func))
    found: list[dict] = []
    for fn, header, (lo, hi, kind), per_step, segs, func in hot:
        if any(f2 == fn and lo2 <= lo and hi <= hi2 and (lo2, hi2) != (lo, hi) for f2, _, (lo2, hi2, _), *_ in hot):
            continue  # inside another per-env loop: that one is the finding
        found.append({"filename": fn, "line": header, "function": func, "kind": kind, "per_step": per_step,
                      "segment": max(segs, key=segs.get) if segs else "other", "span": (lo, hi)})
    return sorted(found, key=lambda d: -d["per_step"])
