"""Source files as a record shows them: paths relative to the working directory, stripped lines."""

from __future__ import annotations

import linecache
import os
from functools import lru_cache


@lru_cache(maxsize=None)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def real_path(filename: str) -> str:
    """``os.path.realpath(filename)``, its folder's resolution remembered: a scan of the loaded modules
    or a record resolves thousands of files in a few hundred folders, and ``realpath`` reads every
    component of every path (~0.1 ms a file on a real stack). The file itself is still looked at (one
    ``lstat``): a file that is a link is resolved in full."""
    folder, base = os.path.split(filename)
    if not os.path.isabs(filename) or base in ("", ".", "..") or os.path.islink(filename):
        return os.path.realpath(filename)
    return os.path.join(_real_folder(folder), base)


def relpath(filename: str, cwd: str | None = None) -> str:
    """``filename`` relative to the working directory when it lies under it, else absolute."""
    if filename.startswith("<"):
        return filename
    cwd = _real_folder(cwd or os.getcwd())
    real = real_path(filename)
    if real == cwd or real.startswith(cwd + os.sep):
        return os.path.relpath(real, cwd)
    return real


def source_line(filename: str, line: int) -> str:
    """The stripped source line, '' when unavailable."""
    return linecache.getline(filename, line).strip()
