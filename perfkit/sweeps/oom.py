"""The one out-of-memory check: does an exception, or a point's log, say the process ran out of memory?

The sweep worker asks about the exception that ended a point (:func:`is_oom`); the sweep asks about
the tail of a point's log when the worker could not say (a script target, a process killed mid-write:
:func:`is_oom_text`). Both read the same pattern, so a message one of them calls OOM the other does too.
"""

from __future__ import annotations

import re
import sys

OOM_PATTERN = re.compile(
    r"out of memory"  # torch ("CUDA out of memory"), CUDA's own strings
    r"|OutOfMemoryError|\bMemoryError\b"  # the exception names, as a traceback prints them
    r"|Failed to allocate \d+ bytes"  # Warp
    r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"  # the driver and runtime error codes
    r"|can't allocate memory|Cannot allocate memory",  # the C library (ENOMEM), glibc's malloc
    re.IGNORECASE,
)


def is_oom_text(text: str) -> bool:
    """True when ``text`` (an error message, a log) reports an out-of-memory error."""
    return bool(OOM_PATTERN.search(text or ""))


def is_oom(exc: BaseException) -> bool:
    """An out-of-memory error from Python (``MemoryError``), torch (``torch.cuda.OutOfMemoryError``)
    or a library that raises a ``RuntimeError`` with an allocator's message (Warp, CUDA)."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if isinstance(oom_type, type) and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and is_oom_text(str(exc))
