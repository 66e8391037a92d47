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


def is_excluded(path: str, patterns, root: str | None = None) -> bool:
    """Whether ``path`` matches a configured pattern: as a path relative to ``root`` (the config file's folder;
    default the working directory) or one of its parent folders, or — for a pattern without ``/`` — by the name
    of one of its components below ``root`` (``third_party``, ``*_pb2.py``)."""
    if not patterns:
        return False
    rel = display_path(path) if root is None else os.path.relpath(path, root).replace(os.sep, "/")
    parts = [p for p in rel.split("/") if p not in ("..", ".")]
    prefixes = ["/".join(rel.split("/")[: i + 1]) for i in range(rel.count("/") + 1)]
    for p in patterns:
        p = p.rstrip("/")
        if p.startswith("./"):
            p = p[2:]
        if any(fnmatch.fnmatchcase(x, p) for x in prefixes):
            return True
        if "/" not in p and any(fnmatch.fnmatchcase(part, p) for part in parts):
            return True
    return False


def discover(paths, exclude=(), root: str | None = None):
    """Yield (path, error) for every .py/.pyi file under ``paths``; error is a message or None.

    Explicitly named files are linted whatever their suffix; configured excludes apply to both; the
    default excludes (``.git``, ``__pycache__``, ``build``, ...) only to folders found while walking.
    """
    seen = set()
    for top in paths:
        if not os.path.exists(top):
            yield top, "no such file or directory"
            continue
        if os.path.isfile(top):
            if not is_excluded(top, exclude, root) and top not in seen:
                seen.add(top)
                yield top, None
            continue
        if not os.path.isdir(top):  # a FIFO, a device, a socket: not source to read
            yield top, "not a regular file or a directory"
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(
                d for d in dirnames
                if not any(fnmatch.fnmatchcase(d, p) for p in DEFAULT_EXCLUDE)
                and not is_excluded(os.path.join(dirpath, d), exclude, root)
            )
            for name in sorted(filenames):
                if not name.endswith((".py", ".pyi")):
                    continue
                full = os.path.join(dirpath, name)
                if full in seen or is_excluded(full, exclude, root):
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
