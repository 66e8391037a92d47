"""One finding from two sides: the linter's static findings joined with what a profile measured.

``join(violations, run, linted)`` matches each static finding to the runtime findings of a run record
(``perfkit profile -o run.json``) at the same source line: by the rule a runtime finding names
(``lint_rule``, when the record has it), else by the same kind (sync, alloc, loop, stream). A matched finding
carries the line's measured price (ms/step) and events per step; a finding in a file the profile ran but
whose line it never priced is *not hot in this run*; one in a file the profile never entered is *not run*.
Runtime findings that no static finding matches are *runtime-only*: a gap in the linter when their file
was linted, code the linter did not read otherwise. Ranking: priced findings by ms/step (then per-step
count), then not hot, then not run; runtime-only ones by ms/step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from perfkit.lint.files import display_path

PRICED, NOT_HOT, NOT_RUN = "priced", "not hot in this run", "not run in this profile"
_ORDER = {PRICED: 0, NOT_HOT: 1, NOT_RUN: 2}


@dataclass
class Ranked:
    """A static finding with what the profile measured at its line."""

    violation: object  # perfkit.lint.model.Violation
    status: str  # PRICED | NOT_HOT | NOT_RUN
    ms_per_step: float | None = None  # summed over the matched runtime findings (None: none was priced)
    per_step: float = 0.0
    count: int = 0
    ops: list = field(default_factory=list)  # the runtime findings' ops ("`.item()`", "torch.zeros")


@dataclass
class RuntimeOnly:
    """A runtime finding no static finding matches."""

    finding: object  # perfkit.record.Finding
    linted: bool  # its file was among the linted ones: a gap in the linter


@dataclass
class Joined:
    ranked: list
    runtime_only: list
    steps: int = 0


def _parts(path: str) -> tuple:
    """A runtime path as comparable parts: real and absolute when the file exists here, else as recorded."""
    p = os.path.realpath(path) if os.path.exists(path) else os.path.normpath(path)
    return tuple(p.replace(os.sep, "/").split("/"))


def _key(path: str) -> tuple:
    """A linted path: (its real parts, the parts as given when relative, else ())."""
    given = os.path.normpath(path).replace(os.sep, "/")
    rel = () if os.path.isabs(given) or given.startswith("..") else tuple(given.split("/"))
    return _parts(path), rel


def _same_file(key: tuple, parts: tuple) -> bool:
    """The same file; or, for a record made in another checkout or folder, the linted path as given
    (``examples/train.py``) is the end of the recorded one."""
    real, rel = key
    return real == parts or (bool(rel) and parts[-len(rel):] == rel)


class _Index:
    """Runtime findings by file, then line."""

    def __init__(self, findings):
        self.by_file: dict = {}  # parts -> {line: [Finding]}
        self.ran: set = set()  # parts of every file the profile saw run (a finding's site or its chain)
        for f in findings:
            self.by_file.setdefault(_parts(f.path), {}).setdefault(f.line, []).append(f)
            self.ran.add(_parts(f.path))
            self.ran.update(_parts(site.rsplit(":", 1)[0]) for site in f.chain)

    def at(self, key: tuple, line: int) -> list:
        return [f for parts, lines in self.by_file.items() if _same_file(key, parts) for f in lines.get(line, ())]

    def ran_file(self, key: tuple) -> bool:
        return any(_same_file(key, parts) for parts in self.ran)


def _matches(v, f) -> bool:
    rule = getattr(f, "lint_rule", None)
    if rule:
        return rule == v.rule
    return f.kind == v.category


def join(violations, run, linted=()) -> Joined:
    """Static ``violations`` ranked by ``run``'s measured costs; ``linted``: the paths of the linted files."""
    index = _Index(run.findings)
    used: set = set()
    ranked = []
    for v in violations:
        key = _key(v.path)
        hits = [f for f in index.at(key, v.line) if _matches(v, f)]
        if hits:
            used.update(id(f) for f in hits)
            prices = [p for p in map(run.price_ms, hits) if p is not None]  # a CPU run: the GPU price
            ranked.append(Ranked(v, PRICED, sum(prices) if prices else None, sum(f.per_step for f in hits),
                                 sum(f.count for f in hits), [f.op for f in hits]))
        else:
            ranked.append(Ranked(v, NOT_HOT if index.ran_file(key) else NOT_RUN))
    ranked.sort(key=lambda r: (_ORDER[r.status], -(r.ms_per_step or 0.0), -r.per_step, r.violation.sort_key()))
    linted_keys = [_key(p) for p in linted]
    only = [RuntimeOnly(f, any(_same_file(k, _parts(f.path)) for k in linted_keys))
            for f in run.findings if id(f) not in used]
    only.sort(key=lambda r: (-(run.price_ms(r.finding) or 0.0), -r.finding.per_step, r.finding.path, r.finding.line))
    return Joined(ranked, only, run.steps)


def _ms(x) -> str:
    return "—" if x is None else f"{x:.3g}"


def text(joined: Joined, source: str) -> str:
    """The ranked findings, then the runtime-only ones, for the console."""
    out = [f"Ranked by the cost measured in {source} ({joined.steps} steady steps):",
           f"  {'ms/step':>8} {'per step':>9}  finding"]
    for r in joined.ranked:
        v = r.violation
        where = f"{v.path}:{v.line}:{v.col}: {v.rule} {v.message}" + ("" if v.confidence == "high"
                                                                       else f" [{v.confidence}]")
        if r.status == PRICED:
            out.append(f"  {_ms(r.ms_per_step):>8} {r.per_step:>9.3g}  {where}")
        else:
            out.append(f"  {r.status}:  {where}")
    if joined.runtime_only:
        out += ["", "Runtime-only: measured by the profile, no static finding at the line "
                    "(in a linted file: a gap in the linter; otherwise code the linter did not read):",
                f"  {'ms/step':>8} {'per step':>9}  site"]
        for r in joined.runtime_only:
            f = r.finding
            note = "" if r.linted else "  (not in the linted files)"
            would = " (would sync on GPU)" if f.would_sync_on_gpu else ""
            out.append(f"  {_ms(f.est_ms_per_step):>8} {f.per_step:>9.3g}  {display_path(f.path)}:{f.line}: "
                       f"runtime-only {f.kind} `{f.op}`{would}{note}")
    return "\n".join(out) + "\n"


def to_json(joined: Joined) -> dict:
    """``{"ranked": [finding + measured], "runtime_only": [...]}``."""
    ranked = []
    for r in joined.ranked:
        d = r.violation.to_json()
        d["measured"] = {"status": r.status, "ms_per_step": r.ms_per_step, "per_step": r.per_step,
                         "count": r.count, "ops": r.ops}
        ranked.append(d)
    only = [{"path": display_path(r.finding.path), "line": r.finding.line, "kind": r.finding.kind,
             "op": r.finding.op, "ms_per_step": r.finding.est_ms_per_step, "per_step": r.finding.per_step,
             "count": r.finding.count, "would_sync_on_gpu": r.finding.would_sync_on_gpu,
             "lint_rule": getattr(r.finding, "lint_rule", None), "in_linted_files": r.linted}
            for r in joined.runtime_only]
    return {"steps": joined.steps, "ranked": ranked, "runtime_only": only}
