"""The linter's engine: parse a module, find its hot paths, walk each unit once, dispatch to rules.

Rules live in ``perfkit.lint.rules`` (one family per module) and register *checks* by AST node type
with ``perfkit.lint.registry.check``. A check receives the :class:`Context` and the node and calls ``ctx.report``.
Checks of hot-only rules are called only on hot paths; the others (PK4xx, PK5xx) everywhere.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field

from perfkit.lint import directives as _directives
from perfkit.lint.hotpaths import HotPaths, find_hot_project, is_setup, setup_when_proven
from perfkit.lint.infer import typer_for
from perfkit.lint.model import FileError, Violation
from perfkit.lint.modinfo import ModuleInfo, Unit, error_path, unit_nodes
from perfkit.lint.project import Project
from perfkit.lint import rules as _rules  # noqa: F401  (importing the families registers their checks)
from perfkit.lint.registry import CONFIDENCES, NODE_CHECKS, RULES, UNIT_CHECKS, matches

@dataclass
class Options:
    select: tuple = ()  # rule IDs/prefixes; empty: all
    ignore: tuple = ()
    hot: tuple = ()  # extra hot function names / patterns (fnmatch, name or Class.method)
    all_functions: bool = False
    min_confidence: str = "low"  # report only findings at least this confident: low | medium | high

    def enabled(self, rule_id: str) -> bool:
        if self.select and not matches(rule_id, self.select):
            return False
        return not (self.ignore and matches(rule_id, self.ignore))


@dataclass
class Context:
    mod: ModuleInfo
    unit: Unit
    options: Options
    directives: object
    lines: list
    out: list
    hot: bool = False
    proven: bool = False  # on a proven per-step path (hotpaths.HotPaths.proven, or inside a rollout loop)
    setup: bool = False  # __init__ and friends: allocation is the point
    in_hot_lambda: bool = False  # inside a lambda that set-up code binds and hot code calls (HotPaths.lambda_spans)
    _typer: object = None
    _seen: set = field(default_factory=set)

    @property
    def typer(self):
        if self._typer is None:
            self._typer = typer_for(self.mod, self.unit)
        return self._typer

    def kind(self, expr):
        return self.typer.kind(expr)

    def qual(self, expr):
        return self.mod.qual(expr)

    def report(self, rule_id: str, node, confidence: str = "high", promote: bool = True, **fields):
        """One finding of ``rule_id`` at ``node``. ``confidence``: high (the code shows a device tensor / the
        sync for certain), medium (inferred from a sync-prone method on a receiver of unknown type), low; a
        medium sync on a proven per-step path is high unless ``promote`` is False (the sync-prone call is not
        on this line: a callee's, which may take another branch for another type).
        Rules whose default severity is ``error`` report ``error`` only when confident (high)."""
        rule = RULES[rule_id]
        if rule.hot_only and not self.hot:
            return
        if rule.setup_ok and not self.in_hot_lambda and (self.setup or is_setup(self.unit) and (
                not self.proven or setup_when_proven(self.unit))):
            return  # __init__, _init_buffers, build_*: allocating is their point (unless a rollout loop calls
            # it every step: sheeprl's `prepare_obs(fabric, obs)` uploads each step's observations)
        if not self.options.enabled(rule_id):
            return
        if confidence == "medium" and self.proven and rule.category in ("sync", "alloc") and promote:
            # a sync-prone call (or torch's own `.clone()`) on code that runs every step: the likely reading is a
            # tensor
            confidence = "high"
        if CONFIDENCES.index(confidence) > CONFIDENCES.index(self.options.min_confidence):
            return
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + 1
        end_line = getattr(node, "end_lineno", None) or line
        key = (rule_id, line)  # one finding per rule and line: `a.any() or b.any()` is one site
        if key in self._seen:
            return
        self._seen.add(key)
        if self.directives.suppressed(rule_id, line, min(end_line, line + 2)):
            return
        end_col = (getattr(node, "end_col_offset", None) or 0) + 1
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if not text.isascii():  # ast columns count UTF-8 bytes; report characters
            col = len(text.encode()[:col - 1].decode("utf-8", "ignore")) + 1
            if end_line == line:
                end_col = len(text.encode()[:end_col - 1].decode("utf-8", "ignore")) + 1
        source = text.strip()
        self.out.append(
            Violation(self.mod.path, line, col, rule_id, rule.category, rule.message.format(**fields),
                      rule.severity if confidence == "high" else "warning", end_line, end_col, source, confidence)
        )


def _line(node) -> int:
    line = getattr(node, "lineno", None)
    if line is None:  # comprehension, withitem, arguments...
        inner = getattr(node, "iter", None) or getattr(node, "context_expr", None)
        line = getattr(inner, "lineno", 0)
    return line


def _walk_unit(ctx: Context, unit: Unit, unit_hot: bool, loop_spans: list, unit_proven: bool = False,
               cold_spans=(), lambda_spans=(), iter_spans=()):
    """Dispatch every node of ``unit`` to the checks registered for its type."""
    table = NODE_CHECKS
    failing = error_path(unit) if unit_hot or loop_spans or iter_spans else ()
    for node in unit_nodes(unit):
        checks = table.get(type(node))
        if not checks:
            continue
        hot = unit_hot
        proven = unit_proven
        if lambda_spans:
            line = _line(node)
            spans = [p for s, e, p in lambda_spans if s <= line <= e]
            ctx.in_hot_lambda = bool(spans)
            if spans:
                hot, proven = True, proven or any(spans)
        if failing and id(node) in failing:
            hot = proven = False  # `raise ValueError(f"bad {x}")`, an assert's message: only when it fails
            ctx.hot = ctx.proven = False
            for fn, everywhere in checks:
                if everywhere:
                    fn(ctx, node)
            continue
        if loop_spans and not (hot and proven):
            line = _line(node)
            in_loop = any(s <= line <= e for s, e in loop_spans)
            hot, proven = hot or in_loop, proven or in_loop
        if iter_spans and not hot:  # a training iteration loop's own lines: once per iteration, hot (not proven)
            line = _line(node)
            hot = any(s <= line <= e for s, e in iter_spans)
        if cold_spans and hot:
            line = _line(node)
            if any(s <= line <= e for s, e in cold_spans):
                hot = proven = False  # a block no hot caller runs (`if verbose:` called with verbose=False)
        ctx.hot = hot
        ctx.proven = proven
        for fn, everywhere in checks:
            if hot or everywhere:
                fn(ctx, node)


def lint_module(tree: ast.Module, text: str, path: str, options: Options | None = None) -> list:
    """Findings of one parsed module, linted alone (sorted)."""
    options = options or Options()
    dirs = _directives.parse(text)
    if dirs.ignore_file:
        return []
    mod = ModuleInfo(tree, text, path)
    project = Project([mod])
    hp = find_hot_project(project, lambda m: dirs, options.hot, options.all_functions)
    return check_module(mod, dirs, hp, options)


def hot_paths(project: Project, directives: dict, options: Options) -> HotPaths:
    """Hot paths over every module of ``project``; ``directives``: ModuleInfo -> Directives."""
    return find_hot_project(project, lambda m: directives[m], options.hot, options.all_functions)


def check_module(mod: ModuleInfo, dirs, hp: HotPaths, options: Options) -> list:
    """Run every check on one module whose hot paths are known (sorted findings)."""
    holder = mod.project if mod.project is not None else mod
    if holder.__dict__.get("_callers_of") is not hp:  # whose calls type the callees' parameters (infer.param_hints)
        holder._callers = hp.units | hp.loop_units
        holder._callers_of = hp
    lines = mod.text.splitlines()
    out: list = []
    cold_node_checks = mod.shares_torch_warp  # the only node checks that apply off hot paths (PK5xx)
    unit_checks = [(fn, pre(mod) if pre else None) for fn, pre in UNIT_CHECKS]
    for unit in mod.units:
        if unit.kernel:
            continue
        hot = unit in hp.units
        proven = unit in hp.proven
        ctx = Context(mod, unit, options, dirs, lines, out, hot=hot, proven=proven, setup=unit in hp.setup_units)
        for fn, wanted in unit_checks:
            if wanted is None or unit in wanted:
                fn(ctx)
        if hot or cold_node_checks or unit in hp.loop_units or unit in hp.lambda_spans or unit in hp.iter_spans:
            _walk_unit(ctx, unit, hot, hp.loop_spans.get(unit, ()), proven, hp.cold_spans.get(unit, ()),
                       hp.lambda_spans.get(unit, ()), hp.iter_spans.get(unit, ()))
    out.sort(key=Violation.sort_key)
    return out


def lint_source(text: str, path: str = "<string>", options: Options | None = None) -> list:
    """Lint Python source text. Raises SyntaxError/ValueError/RecursionError for unparsable text."""
    tree = ast.parse(text, filename=path)
    return lint_module(tree, text, path, options)


def parse_safely(text: str, path: str):
    """(tree, FileError | None): never raises for bad input."""
    try:
        with warnings.catch_warnings():  # the user's invalid escapes etc. are not our diagnostics
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path), None
    except SyntaxError as e:
        return None, FileError(path, f"syntax error: {e.msg}", e.lineno or 0, e.offset or 0)
    except (ValueError, MemoryError) as e:  # null bytes; absurd sizes
        return None, FileError(path, f"cannot parse: {e}")
    except RecursionError:
        return None, FileError(path, "cannot parse: nested too deeply")


def guarded(path: str, fn, *args):
    """(fn(*args), None) or ([], FileError) when analysing the file failed: one file, not the run."""
    try:
        return fn(*args), None
    except RecursionError:
        return [], FileError(path, "nested too deeply to analyse")
    except Exception as e:  # a bug in a rule must not stop the run over the other files
        return [], FileError(path, f"internal error in perfkit lint ({type(e).__name__}: {e}); please report it")


def lint_text_safely(text: str, path: str, options: Options | None = None):
    """(findings, FileError | None): never raises for bad input."""
    try:
        with warnings.catch_warnings():  # the user's invalid escapes etc. are not our diagnostics
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return [], FileError(path, f"syntax error: {e.msg}", e.lineno or 0, e.offset or 0)
    except (ValueError, MemoryError) as e:  # null bytes; absurd sizes
        return [], FileError(path, f"cannot parse: {e}")
    except RecursionError:
        return [], FileError(path, "cannot parse: nested too deeply")
    try:
        return lint_module(tree, text, path, options), None
    except RecursionError:
        return [], FileError(path, "nested too deeply to analyse")
    except Exception as e:  # a bug in a rule must not stop the run over the other files
        return [], FileError(path, f"internal error in perfkit lint ({type(e).__name__}: {e}); please report it")
