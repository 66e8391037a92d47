"""Sync hooks for NVIDIA Warp: ``wp.synchronize*()`` and reading an array back (``.numpy()``, ``.list()``).

Same counting rules as :mod:`perfkit.collectors.torch_sync`: one call is one event (``.list()`` calls
``.numpy()`` inside: one ``.list()``); on a CUDA array it is a sync attributed to the first user
frame; on a CPU array, where CPU calls are counted, a would-sync-on-GPU event when user code made the
call. ``wp.synchronize*()`` is always a sync on a GPU (would-sync on a CPU-only machine).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from perfkit.collectors import hub
from perfkit.collectors.hub import api_sync_hook, direct_caller, sync_call, tls
from perfkit.collectors.patches import Patch, Patcher, SyncOp, sync_ops, wraps
from perfkit.collectors.patches import install as _install
from perfkit.collectors.patches import originals as _originals


def _array_hook(orig: Callable, op: str) -> Callable:
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused

    @wraps(orig)
    def hook(self, *args, **kwargs):
        if not sinks or state.depth or hub.is_compiling():
            return orig(self, *args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        device = getattr(self, "device", None)
        cuda = bool(getattr(device, "is_cuda", False))
        if not hub.counts(cuda, caller):
            return orig(self, *args, **kwargs)
        return sync_call(orig, op, caller, (self, *args), kwargs, would=not cuda, confirm=False)  # Warp's waits are not torch's to report

    return hook


def _api(orig, p: Patch, wp) -> Callable:
    return api_sync_hook(orig, p.op.label)


def _array(orig, p: Patch, wp) -> Callable:
    return _array_hook(orig, p.op.label)


WAIT, D2H = "device-wide wait", "d2h copy"
PATCHES: tuple[Patch, ...] = (
    Patch("", "synchronize", SyncOp("wp.synchronize()", WAIT, "remove the device-wide synchronize from the step; order work with "
                                    "streams/events", "PK111"), _api, always=True),
    Patch("", "synchronize_device", SyncOp("wp.synchronize_device()", WAIT, "remove the synchronize from the step; order work with "
                                           "streams/events", "PK111"), _api, always=True),
    Patch("", "synchronize_stream", SyncOp("wp.synchronize_stream()", WAIT, "order work with wp.wait_stream / events instead of "
                                           "blocking the host", "PK111"), _api, always=True),
    Patch("", "synchronize_event", SyncOp("wp.synchronize_event()", WAIT, "wait on the device (wp.wait_event) instead of blocking "
                                          "the host", "PK111"), _api, always=True),
    Patch("array", "numpy", SyncOp("wp.array.numpy()", D2H, "keep data on the device (wp.to_torch for zero-copy); read back only "
                                   "for logging", "PK112"), _array, always=True),
    Patch("array", "list", SyncOp("wp.array.list()", D2H, "keep data on the device; read back only for logging", "PK112"),
          _array, always=True),
)

SYNC_OPS = sync_ops(PATCHES)
"""label -> :class:`SyncOp`: every op this family reports."""


def install(patcher: Patcher, always_only: bool = False) -> list[str]:
    """Hook Warp (every row is an always row: a CUDA array's read-back always waits)."""
    import warp as wp

    return _install(patcher, wp, PATCHES, always_only)


def originals(always_only: bool = False) -> dict[str, Any]:
    """Every attribute :data:`PATCHES` replaces, as it is now (the restore check compares before/after)."""
    import warp as wp

    return _originals(wp, PATCHES, always_only)
