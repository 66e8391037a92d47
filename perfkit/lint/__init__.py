"""``perfkit lint``: a static (AST) linter for GPU sync points, allocations and per-env loops.

It never imports the code it reads, and importing it never imports torch::

    from perfkit.lint import lint_paths, lint_source, Options
    result = lint_paths(["src/"], Options(select=("PK1",)))
    for v in result.violations: print(v.path, v.line, v.rule, v.message)
"""

from perfkit.lint.engine import Options, lint_source
from perfkit.lint.model import FileError, Violation
from perfkit.lint.registry import Rule
from perfkit.lint.rules import all_rules, get_rule
from perfkit.lint.run import LintResult, lint_file, lint_paths

__all__ = ["Options", "lint_source", "lint_paths", "lint_file", "LintResult", "Violation", "FileError", "Rule",
           "all_rules", "get_rule"]
