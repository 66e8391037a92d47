"""Source files as a record shows them: paths relative to the working directory, stripped lines."""

from __future__ import annotations

import linecache
import os


def relpath(filename: str, cwd: str | None = None) -> str:
    """``filename`` relative to the working directory when it lies under it, else absolute."""
    if filename.startswith("<"):
        return filename
    cwd = os.path.realpath(cwd or os.getcwd())
    real = os.path.realpath(filename)
    if real == cwd or real.startswith(cwd + os.sep):
        return os.path.relpath(real, cwd)
    return real


def source_line(filename: str, line: int) -> str:
    """The stripped source line, '' when unavailable."""
    return linecache.getline(filename, line).strip()
