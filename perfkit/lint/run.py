"""Linting many files: discovery, reading, one diagnostic per file that cannot be checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.lint.engine import Options, lint_text_safely
from perfkit.lint.files import discover, display_path, read_source
from perfkit.lint.model import FileError


@dataclass
class LintResult:
    violations: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # FileError: files that could not be checked
    files: int = 0  # files checked
    lines: int = 0  # lines checked


def lint_file(path: str, options: Options | None = None, result: LintResult | None = None) -> LintResult:
    result = result or LintResult()
    shown = display_path(path)
    try:
        text = read_source(path)
    except (UnicodeDecodeError, SyntaxError, LookupError) as e:
        result.errors.append(FileError(shown, f"cannot decode: {e}"))
        return result
    except OSError as e:
        result.errors.append(FileError(shown, e.strerror or str(e)))
        return result
    found, err = lint_text_safely(text, shown, options)
    if err is not None:
        result.errors.append(err)
    else:
        result.files += 1
        result.lines += text.count("\n") + 1
        result.violations.extend(found)
    return result


def lint_paths(paths, options: Options | None = None, exclude=(), root: str | None = None) -> LintResult:
    """Lint every Python file under ``paths``. Never raises for bad files: see ``result.errors``.

    ``exclude`` patterns match paths relative to ``root`` (default: the working directory)."""
    result = LintResult()
    for path, problem in discover(paths, exclude, root):
        if problem:
            result.errors.append(FileError(display_path(path), problem))
            continue
        lint_file(path, options, result)
    return result
