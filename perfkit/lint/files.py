"""Finding the Python files to lint, and reading them as text (encoding cookies honoured)."""

from __future__ import annotations

import fnmatch
import io
import os
import tokenize

# never descended into (like ruff/flake8 defaults)
DEFAULT_EXCLUDE = (".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
                   ".pytest_cache", ".ruff_cache", "node_modules", "build", "dist", ".eggs", "*.egg-info")


def display_path(path: str) -> str:
    """Relative to the working directory where it can be, with forward slashes."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        rel = path
    if rel.startswith(".." + os.sep) or rel == "..":
        rel = os.path.abspath(path)
    return rel.replace(os.sep, "/")


def is_excluded(path: str, patterns) -> bool:
    rel = display_path(path)
    parts = rel.split("/")
    for p in patterns:
        p = p.rstrip("/")
        if fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(rel, p + "/*") or any(
            fnmatch.fnmatchcase(part, p) for part in parts
        ):
            return True
    return False


def discover(paths, exclude=()):
    """Yield (path, error) for every .py/.pyi file under ``paths``; error is a message or None.

    Explicitly named files are linted whatever their suffix; excluded patterns apply to both.
    """
    patterns = tuple(exclude) + DEFAULT_EXCLUDE
    seen = set()
    for root in paths:
        if not os.path.exists(root):
            yield root, "no such file or directory"
            continue
        if os.path.isfile(root):
            if not is_excluded(root, exclude) and root not in seen:
                seen.add(root)
                yield root, None
            continue
        for dirpath, dirnames, filenames in os.walk(root, onerror=None):
            dirnames[:] = sorted(d for d in dirnames if not is_excluded(os.path.join(dirpath, d), patterns))
            for name in sorted(filenames):
                if not name.endswith((".py", ".pyi")):
                    continue
                full = os.path.join(dirpath, name)
                if full in seen or is_excluded(full, patterns):
                    continue
                seen.add(full)
                yield full, None


def read_source(path: str) -> str:
    """The file's text. Raises OSError, or UnicodeDecodeError/SyntaxError for bad encodings."""
    with open(path, "rb") as fh:
        data = fh.read()
    return decode(data)


def decode(data: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text
