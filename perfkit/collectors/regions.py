"""Segments of the training loop's own code, read from its source (docs/design.md, Segments).

The function that calls the env step — rsl_rl's ``OnPolicyRunner.learn``, or a single-file script's
module-level code (CleanRL) — runs much of a training iteration inline, where no function call can be
wrapped. Its code is read once (``ast``), when the discovery window sees it call the first step:

* **learner**: a statement of the loop that calls ``backward()``, ``zero_grad()``, an optimizer's
  ``step()`` or a function named like an update (``ppo.update(obs)``) and not the env step (CleanRL's
  ``for epoch in range(update_epochs): ...``), whole;
* **logging**: a statement that calls a logger or writer (``print``, ``writer.add_scalar``,
  ``wandb.log``, ``self.logger.log``, ``logging.info``), a compound statement made only of those, and
  a statement whose results only those read (``explained_var = ...``), unless it calls the learner;
* **policy**: the action sampling — the statements before the env step, in the env step's loop body,
  that assign a name the env step's arguments are made from (transitively: SB3's ``actions =
  actions.cpu().numpy()`` then ``clipped_actions = ...``) — and those arguments (``action.cpu().numpy()``);
* the rest of the loop's code is named after the loop: ``other/<qualname>`` (a named remainder of
  "other", not an unexplained one).

At run time, when no segment is open (the segment stack is empty), :func:`outside` finds the loop's
frame on the calling stack and reads the segment of the instruction it is at (a table from
instruction offset to segment, made from ``co_positions``): sync and allocation events take it, and
segment transitions back to "no segment" switch the time to it (time between transitions goes to the
segment of the instruction where the span began).
"""

from __future__ import annotations

import ast
import linecache
import os
import re
import sys
from types import CodeType, FrameType
from typing import Iterator

from perfkit.collectors import hub
from perfkit.collectors.segments import segment_for_name

# id(loop code) -> (the code, {instruction offset: segment}, default). Keyed by identity: a code object's
# hash reads its whole contents (~1 µs for a large function) and the walk below looks up every frame.
_tables: dict[int, tuple[CodeType, dict[int, str], str]] = {}
MAX_DEPTH = 48  # frames walked up from an event to the loop's frame

_LOGGER_RECEIVER = re.compile(r"(^|_)(writer|logger|logging|log|wandb|summary|tb|tensorboard|mlflow|pbar|tqdm|progress)(_|$)|(Writer|Logger)$",
                              re.IGNORECASE)
_WRITER_METHOD = re.compile(r"^add_(scalar|scalars|histogram|image|images|text|figure|video|hparams|graph)$")
# what a training loop calls to run its update (only the name is known here: exact names, not
# ``update_locals`` or ``_update_info_buffer``)
_UPDATE_NAMES = frozenset({"update", "train", "learn", "optimize", "optimise", "train_step", "learn_step", "update_step",
                           "update_policy", "update_model", "update_parameters", "train_on_batch"})
_OPTIMIZER = re.compile(r"optim|(^|_)opt\d*(_|$)", re.IGNORECASE)


def outside(frame: FrameType | None = None) -> str:
    """The segment of the calling thread's time and events when no segment is open: the segment of the
    loop instruction running now, "other" when no loop is known or it is not on the stack."""
    if not _tables:
        return "other"
    f = sys._getframe(1) if frame is None else frame
    get = _tables.get
    n = MAX_DEPTH
    while f is not None and n:
        code = f.f_code
        t = get(id(code))
        if t is not None and t[0] is code:
            return t[1].get(f.f_lasti, t[2])
        f = f.f_back
        n -= 1
    return "other"


def install(code: CodeType, table: dict[int, str], default: str) -> None:
    """Know ``code`` as a training loop: its instructions' segments and the label of the rest."""
    _tables[id(code)] = (code, table, default)
    hub.outside_segment = outside


def clear() -> None:
    _tables.clear()
    hub.outside_segment = hub._no_segment


def loop_label(code: CodeType) -> str:
    """``other/<qualname>`` of a loop's code (``other/<file>:<module>`` for a script's module level)."""
    name = getattr(code, "co_qualname", code.co_name)
    if name == "<module>":
        name = f"{os.path.basename(code.co_filename)}:<module>"
    return "other/" + name.replace(".<locals>", "")


# ---- reading the loop's source ---------------------------------------------------------------------------


def table_for(code: CodeType, step_line: int, step_names: frozenset[str]) -> dict[int, str]:
    """{instruction offset: segment} of ``code``'s instructions inside a region (empty when its source
    cannot be read or has no env-step call on ``step_line``)."""
    node = _node_of(code)
    if node is None:
        return {}
    step_call = next((c for c in _own_calls(node) if c.lineno <= step_line <= (c.end_lineno or c.lineno)
                      and isinstance(c.func, ast.Attribute) and c.func.attr in step_names), None)
    if step_call is None:
        return {}
    regions = _regions(node, step_call)
    if not regions:
        return {}
    table: dict[int, str] = {}
    for i, pos in enumerate(code.co_positions()):
        line, end_line, col, end_col = pos
        if line is None or col is None:
            continue
        seg = _innermost(regions, (line, col), (end_line or line, end_col if end_col is not None else col))
        if seg is not None:
            table[2 * i] = seg
    return table


def _node_of(code: CodeType) -> ast.AST | None:
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    if code.co_name == "<module>":
        return tree
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == code.co_name:
            first = min([n.lineno, *(d.lineno for d in n.decorator_list)])
            if code.co_firstlineno in (n.lineno, first):
                return n
    return None


def _own(node: ast.AST) -> Iterator[ast.AST]:
    """``node``'s descendants that run in its own code (not inside nested functions, classes, lambdas)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield child
        yield from _own(child)


def _own_calls(node: ast.AST) -> Iterator[ast.Call]:
    return (n for n in _own(node) if isinstance(n, ast.Call))


def _dotted_last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _dotted_last(node.func)
    return ""


def _is_logging_call(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id == "print" or segment_for_name(f.id) == "logging"
    if isinstance(f, ast.Attribute):
        if _WRITER_METHOD.match(f.attr) and _LOGGER_RECEIVER.search(_dotted_last(f.value) or ""):
            return True
        return bool(_LOGGER_RECEIVER.search(_dotted_last(f.value) or ""))
    return False


def _is_learner_call(call: ast.Call) -> bool:
    """``loss.backward()``, ``optimizer.zero_grad()``, ``optimizer.step()``, or a call of a function named
    like an update (``ppo.update(obs)``, ``self.alg.update()``, ``train_step(batch)``)."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id.lstrip("_") in _UPDATE_NAMES
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr in ("backward", "zero_grad") or f.attr.lstrip("_") in _UPDATE_NAMES:
        return True
    return f.attr == "step" and bool(_OPTIMIZER.search(_dotted_last(f.value)))


def _body_lists(stmt: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for field in ("body", "orelse", "finalbody", "handlers"):
        v = getattr(stmt, field, None)
        if isinstance(v, list) and v and isinstance(v[0], (ast.stmt, ast.excepthandler)):
            out.append(v)
    for case in getattr(stmt, "cases", ()) or ():
        out.append(case.body)
    return out


def _leaves(stmt: ast.stmt) -> list[ast.stmt]:
    bodies = _body_lists(stmt)
    if not bodies:
        return [stmt]
    return [leaf for body in bodies for s in body for leaf in _leaves(s)]


def _stores(stmt: ast.AST) -> set[str]:
    return {n.id for n in [stmt, *_own(stmt)] if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _span(n: ast.AST) -> tuple[tuple[int, int], tuple[int, int], int]:
    return (n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0), 0


def _regions(root: ast.AST, step_call: ast.Call) -> list[tuple[tuple[int, int], tuple[int, int], int, str]]:
    """(start, end, depth, segment) of each region of ``root``'s own code (innermost = deepest)."""
    out: list[tuple[tuple[int, int], tuple[int, int], int, str]] = []
    contains_step = {id(n) for n in _ancestors(root, step_call)}

    def add(n: ast.AST, seg: str, depth: int) -> None:
        start, end, _ = _span(n)
        out.append((start, end, depth, seg))

    def visit(stmts: list, depth: int) -> None:
        for s in stmts:
            if not isinstance(s, ast.stmt) or isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if isinstance(s, ast.excepthandler):
                    visit(s.body, depth + 1)
                continue
            calls = [s] if isinstance(s, ast.Call) else []
            calls += [c for c in _own(s) if isinstance(c, ast.Call)]
            if id(s) not in contains_step and any(_is_learner_call(c) for c in calls):
                add(s, "learner", depth)
            leaves = _leaves(s)
            if id(s) not in contains_step and leaves and all(
                    any(_is_logging_call(c) for c in _own(leaf) if isinstance(c, ast.Call)) for leaf in leaves):
                add(s, "logging", depth + 1)
                continue
            for body in _body_lists(s):
                visit(body, depth + 2)
        # the action sampling: in the body that holds the env step, the statements before it that
        # assign what its arguments read
        step_stmt = next((s for s in stmts if id(s) in contains_step and isinstance(s, ast.stmt)
                          and not _body_lists(s)), None)
        if step_stmt is not None:
            reads = {n.id for a in [*step_call.args, *(k.value for k in step_call.keywords)]
                     for n in [a, *_own(a)] if isinstance(n, ast.Name)}
            before = [s for s in stmts[:stmts.index(step_stmt)] if isinstance(s, ast.stmt)]
            for s in reversed(before):  # back from the step: what its arguments are made from, transitively
                if _stores(s) & reads:
                    add(s, "policy", depth)
                    reads |= {n.id for n in _own(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for a in [*step_call.args, *(k.value for k in step_call.keywords)]:
                add(a, "policy", depth + 1)

    visit(getattr(root, "body", []), 0)
    for stmt in _for_logging(root, contains_step, out):
        add(stmt, "logging", 10**6)
    return out


def _for_logging(root: ast.AST, contains_step: set[int], regions: list) -> list[ast.stmt]:
    """Statements that compute values only logging reads (``explained_var = ...``, CleanRL's
    ``clipfracs += [... .item()]``): every later read of what they assign is in a logging statement or
    another such statement (a fixpoint over the loop's own code)."""
    logging_spans = [(a, b) for a, b, _, seg in regions if seg == "logging"]

    def in_logging(n: ast.AST) -> bool:
        start, end, _ = _span(n)
        return any(a <= start and end <= b for a, b in logging_spans)

    # each simple statement, and each compound statement's header, with the names it reads
    units: list[tuple[ast.AST, set[str], set[str]]] = []
    for n in [root, *_own(root)]:
        if not isinstance(n, ast.stmt):
            continue
        if _body_lists(n):
            head = [getattr(n, f) for f in ("test", "iter", "target", "items", "subject") if getattr(n, f, None) is not None]
            nodes = [x for h in head for y in (h if isinstance(h, list) else [h]) for x in [y, *_own(y)]]
            units.append((n, {x.id for x in nodes if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)}, set()))
        else:
            reads = {x.id for x in _own(n) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)}
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                reads.add(n.target.id)
            units.append((n, reads, _stores(n)))
    def does_work(n: ast.AST) -> bool:  # calls the learner (``loss_dict = self.alg.update()``): not for logging
        return any(isinstance(c, ast.Call) and _is_learner_call(c) for c in _own(n))

    readers_of: dict[str, list[ast.AST]] = {}
    for n, reads, _ in units:
        for name in reads:
            readers_of.setdefault(name, []).append(n)
    logging_units = {id(n) for n, _, _ in units if in_logging(n)}
    candidates = [(n, stores) for n, _, stores in units
                  if stores and id(n) not in logging_units and id(n) not in contains_step and not does_work(n)]
    found: set[int] = set()
    changed = True
    while changed:
        changed = False
        for n, stores in candidates:
            if id(n) in found:
                continue
            readers = [m for name in stores for m in readers_of.get(name, ()) if m is not n]
            if readers and all(id(m) in found or id(m) in logging_units for m in readers):
                found.add(id(n))
                changed = True
    return [n for n, _ in candidates if id(n) in found]


def _ancestors(root: ast.AST, target: ast.AST) -> list[ast.AST]:
    path: list[ast.AST] = []

    def walk(n: ast.AST) -> bool:
        if n is target:
            path.append(n)
            return True
        for c in ast.iter_child_nodes(n):
            if walk(c):
                path.append(n)
                return True
        return False

    walk(root)
    return path


def _innermost(regions, start: tuple[int, int], end: tuple[int, int]) -> str | None:
    best = None
    for r_start, r_end, depth, seg in regions:
        if r_start <= start and end <= r_end and (best is None or depth >= best[0]):
            best = (depth, seg)
    return best[1] if best else None
