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

import dis
import sys
from types import CodeType, FrameType

from perfkit.collectors.sites import is_program_file
from perfkit.collectors.hub import tls

MIN_ENVS = 8
MAX_TRIPS = 4  # distinct trip counts kept per loop (more: the trip count varies with the data)
FIX = "replace the per-env Python loop with one batched tensor op over all envs (masks, torch.where, index_put_)"


class LineSampler:
    def __init__(self) -> None:
        self.counts: dict[tuple[CodeType, int], list] = {}  # (code, line) -> [n, {segment: n}]
        self.calls: dict[CodeType, int] = {}  # program code objects entered while sampling
        self.entries: dict[tuple[CodeType, int], int] = {}  # (code, loop header line) -> entries into the loop
        self.trips: dict[tuple[CodeType, int], set[int]] = {}  # (code, loop header) -> distinct trip counts of its entries
        self._at_entry: dict[tuple[CodeType, int], int] = {}  # (code, loop header) -> header events at its last entry
        self.steps = 0
        self._heads: dict[CodeType, dict[int, tuple[int, int, str]]] = {}  # code -> {header line: (first, last line, kind)}
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
                        was = self._at_entry.get(key)
                        if was is not None:  # the previous entry's trip count: its header events but one
                            trips = self.trips.setdefault(key, set())
                            if len(trips) <= MAX_TRIPS:
                                trips.add(c[0] - was - 1)
                        self._at_entry[key] = c[0]
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
        for key, was in self._at_entry.items():  # loops entered last in this sample ended within it
            trips = self.trips.setdefault(key, set())
            if len(trips) <= MAX_TRIPS:
                trips.add(self.counts[key][0] - was)
        self._at_entry.clear()
        for f in self._frames:
            f.f_trace = None
        self._frames.clear()
        self._last.clear()
        self._on = False
        self.steps += 1


_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})
_DICT_VIEWS = frozenset({"items", "keys", "values"})


# opcodes that jump backwards (3.11: JUMP_BACKWARD and POP_JUMP_BACKWARD_IF_*; 3.12+: JUMP_BACKWARD*)
_BACKWARD_OPS = frozenset(op for name, op in dis.opmap.items() if "BACKWARD" in name)


def _has_backward_jump(code: CodeType) -> bool:
    """Whether ``code``'s own bytecode jumps backwards at all: read from the raw opcodes (every other
    byte), which costs ~1 % of disassembling it — most functions a sampled step enters have no loop."""
    return not _BACKWARD_OPS.isdisjoint(code.co_code[::2])


def _loop_heads(code: CodeType) -> dict[int, tuple[int, int, str]]:
    """``{header line: (first line, last line, kind)}`` of the loops in ``code``'s own bytecode (not the
    functions nested in it), found from its backward jumps — no source file is read. A ``for`` loop's
    header is its ``FOR_ITER``'s line; a ``while`` loop's is the line its condition jumps back from.
    A loop over a dict's ``items()``, ``keys()`` or ``values()`` goes over the dict's keys, not over
    envs, however many there are: it is left out."""
    if not _has_backward_jump(code):
        return {}
    try:
        ins = list(dis.get_instructions(code))
    except Exception:  # pragma: no cover - code dis cannot read
        return {}
    at = {i.offset: n for n, i in enumerate(ins)}
    lines: list[int | None] = []
    last = code.co_firstlineno
    for i in ins:  # an instruction without a line of its own belongs to the line before it
        ln = i.positions.lineno if i.positions is not None else None
        last = ln if ln is not None else last
        lines.append(last)
    comp = code.co_name in _COMPREHENSIONS
    heads: dict[int, list] = {}
    for j, i in enumerate(ins):
        if i.opcode not in dis.hasjrel or not isinstance(i.argval, int) or i.argval >= i.offset:
            continue
        if i.opname == "JUMP_BACKWARD_NO_INTERRUPT":  # `yield from` / `await`: no loop of the program's
            continue
        t = at.get(i.argval)
        if t is None:
            continue
        target = ins[t]
        if target.opname == "FOR_ITER":
            if _over_dict(ins, t):
                continue
            # Python 3.12 inlines list/set/dict comprehensions (PEP 709): their loop ends appending
            inlined = j > 0 and ins[j - 1].opname in ("LIST_APPEND", "SET_ADD", "MAP_ADD")
            header, kind = lines[t], "comprehension over envs" if comp or inlined else "for-loop over envs"
        elif "IF" in i.opname:  # a condition at the loop's bottom jumps back into its body
            header, kind = lines[j], "while-loop over envs"
        elif j > 0 and "IF" in ins[j - 1].opname and lines[j - 1] == lines[j]:
            # Python 3.12: the bottom condition jumps out, then an unconditional jump goes back to the body
            header, kind = lines[j], "while-loop over envs"
        else:
            header, kind = lines[t], "while-loop over envs"
        span = [ln for ln in lines[t:j + 1] if ln is not None]
        lo, hi = min(span + [header]), max(span + [header])
        h = heads.get(header)
        if h is None:
            heads[header] = [lo, hi, kind]
        else:
            h[0], h[1] = min(h[0], lo), max(h[1], hi)
    return {h: (lo, hi, kind) for h, (lo, hi, kind) in heads.items()}


def _over_dict(ins: list, for_iter: int) -> bool:
    """Whether the ``FOR_ITER`` at ``ins[for_iter]`` iterates ``x.items()`` / ``.keys()`` / ``.values()``."""
    k = for_iter - 1
    if k < 0 or ins[k].opname != "GET_ITER":
        return False
    for i in reversed(ins[max(0, k - 6):k]):  # back over the call to the attribute it called
        if i.opname in ("LOAD_METHOD", "LOAD_ATTR"):
            return i.argval in _DICT_VIEWS
        if i.opname not in ("PRECALL", "CALL", "CACHE", "PUSH_NULL", "KW_NAMES", "CALL_METHOD"):
            return False
    return False


def follows(trips: set[int] | None, num_envs: int) -> bool:
    """Whether a loop's trip counts can follow the batch: they vary (a loop over the envs that are done),
    or the one trip count is the env count or a fraction of it (``num_envs / k``, k <= 4; one more for a
    comprehension's header). A fixed trip count that is no such fraction (the 5 layers of an MLP at 8
    envs, the 40 keys of an info dict at 64) does not."""
    if not trips or len(trips) > 1:
        return True
    (c,) = trips
    return c > 0 and any(abs(c * k - num_envs) <= 1 for k in range(1, 5))


def is_per_env(per_step: float, per_entry: float, trips: set[int] | None, num_envs: int) -> bool:
    """Whether a loop that iterates ``per_step`` times a step and ``per_entry`` times an entry, with these
    trip counts, is a per-env loop (module doc): at least ``num_envs / 2`` of both, and its trip count
    :func:`follows` the env count. What :func:`hot_loops` asks of each sampled loop; a planted repetition
    of a known count can be asked the same before it runs."""
    threshold = num_envs / 2
    return num_envs >= MIN_ENVS and per_step >= threshold and per_entry >= threshold and follows(trips, num_envs)


def hot_loops(counts: dict, steps: int, num_envs: int | None, entries: dict | None = None,
              trips: dict | None = None) -> list[dict]:
    """Per-env loops from sampled line counts and loop entries: ``{filename, line, function, kind,
    per_step, segment, span}`` (see module doc). A loop header runs once per entry and once per
    iteration, so iterations = header events - entries; ``per_step`` is iterations per step. A loop
    whose trip count does not follow the env count (:func:`follows`) is not one."""
    if not steps or not num_envs or num_envs < MIN_ENVS:
        return []
    entries = entries or {}
    loops: dict[tuple[str, int], list] = {}  # (file, header) -> [iterations, entries, {segment: n}, function, (lo, hi, kind)]
    for (code, line), (n, segs) in counts.items():
        e = entries.get((code, line))
        if e is None:
            continue  # not a loop header (or never entered from outside while sampled)
        span = _loop_heads(code).get(line)
        if span is None:
            continue
        key = (code.co_filename, line)
        acc = loops.setdefault(key, [0, 0, {}, code.co_name, span])
        acc[0] += n - e
        acc[1] += e
        for sg, k in segs.items():
            acc[2][sg] = acc[2].get(sg, 0) + k
        if not code.co_name.startswith("<"):
            acc[3] = code.co_name
    trip_sets: dict[tuple[str, int], set[int]] = {}
    for (code, line), t in (trips or {}).items():
        trip_sets.setdefault((code.co_filename, line), set()).update(t)
    hot: list[tuple] = []
    for (fn, header), (iters, ents, segs, func, span) in loops.items():
        per_step = iters / steps
        if ents <= 0 or not is_per_env(per_step, iters / ents, trip_sets.get((fn, header)), num_envs):
            continue
        hot.append((fn, header, span, per_step, segs, func))
    found: list[dict] = []
    for fn, header, (lo, hi, kind), per_step, segs, func in hot:
        if any(f2 == fn and lo2 <= lo and hi <= hi2 and (lo2, hi2) != (lo, hi) for f2, _, (lo2, hi2, _), *_ in hot):
            continue  # inside another per-env loop: that one is the finding
        found.append({"filename": fn, "line": header, "function": func, "kind": kind, "per_step": per_step,
                      "segment": max(segs, key=segs.get) if segs else "other", "span": (lo, hi)})
    return sorted(found, key=lambda d: -d["per_step"])
