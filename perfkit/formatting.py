"""How perfkit writes a number for a person: one place for every output (console, Markdown, HTML,
compare, the ranks' table, the what-if text), so the same value reads the same everywhere."""

from __future__ import annotations

import math
from typing import Any


def num(v: Any, digits: int = 3) -> str:
    """``-`` for nothing (None, NaN, infinities), ``on``/``off`` for a flag, ``1,234`` for integers and
    for floats of 1000 or more, else ``digits`` significant digits (``0.0123``, ``4.5``, ``0``)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v)


def nbytes(v: Any) -> str:
    """``1.50 GiB``, ``12.00 MiB``, ``512 B``; ``-`` for nothing."""
    if not v:
        return "-"
    v = float(v)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} B"
