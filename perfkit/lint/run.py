"""Linting many files: discovery, reading, one diagnostic per file that cannot be checked."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from perfkit.lint import directives as _directives
from perfkit.lint.engine import Options, check_module, guarded, hot_paths, lint_module, parse_safely
from perfkit.lint.files import discover, display_path, read_source
from perfkit.lint.model import FileError
from perfkit.lint.modinfo import ModuleInfo
from perfkit.lint.project import Project


@dataclass
class LintResult:
    violations: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # FileError: files that could not be checked
    files: int = 0  # files checked
    checked: list = field(default_factory=list)  # their paths, as shown
    lines: int = 0  # lines checked


def lint_file(path: str, options: Options | None = None, result: LintResult | None = None) -> LintResult:
    """Lint one file on its own (hot paths from this file alone)."""
    return lint_paths([path], options, result=result)


def lint_paths(paths, options: Options | None = None, exclude=(), root: str | None = None,
               result: LintResult | None = None) -> LintResult:
    """Lint every Python file under ``paths`` as one project: hot paths flow through calls between the
    files (the project's own imports resolved). Never raises for bad files: see ``result.errors``.

    ``exclude`` patterns match paths relative to ``root`` (default: the working directory)."""
    gc_was_on = gc.isenabled()
    gc.disable()  # every tree stays alive for the call graph: the cyclic GC would re-scan them all, again and again
    try:
        return _lint_paths(paths, options or Options(), exclude, root, result or LintResult())
    finally:
        if gc_was_on:
            gc.enable()


def _lint_paths(paths, options, exclude, root, result) -> LintResult:
    parsed = []  # (ModuleInfo, Directives)
    for path, problem in discover(paths, exclude, root):
        shown = display_path(path)
        if problem:
            result.errors.append(FileError(shown, problem))
            continue
        try:
            text = read_source(path)
        except (UnicodeDecodeError, SyntaxError, LookupError) as e:
            result.errors.append(FileError(shown, f"cannot decode: {e}"))
            continue
        except OSError as e:
            result.errors.append(FileError(shown, e.strerror or str(e)))
            continue
        tree, err = parse_safely(text, shown)
        if err is not None:
            result.errors.append(err)
            continue
        mod, err = guarded(shown, lambda: ModuleInfo(tree, text, shown))
        if err is not None:
            result.errors.append(err)
            continue
        parsed.append((mod, _directives.parse(text)))
    dirs = {m: d for m, d in parsed}
    project = Project([m for m, _ in parsed])
    hp, err = guarded("<project>", hot_paths, project, dirs, options)
    if err is not None:  # the project-wide call graph failed: fall back to one module at a time
        hp = None
    for mod, d in parsed:
        if d.ignore_file:
            result.files += 1
            result.checked.append(mod.path)
            result.lines += mod.text.count("\n") + 1
            continue
        if hp is None:
            found, err = guarded(mod.path, lint_module, mod.tree, mod.text, mod.path, options)
        else:
            found, err = guarded(mod.path, check_module, mod, d, hp, options)
        if err is not None:
            result.errors.append(err)
            continue
        result.files += 1
        result.checked.append(mod.path)
        result.lines += mod.text.count("\n") + 1
        result.violations.extend(found)
    result.errors.sort(key=lambda e: e.path)
    return result
