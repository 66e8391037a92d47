"""Sync hooks for NVIDIA Warp: ``wp.synchronize*()`` and reading an array back (``.numpy()``, ``.list()``).

Same counting rules as :mod:`perfkit.collectors.torch_sync`: one call is one event (``.list()`` calls
``.numpy()`` inside: one ``.list()``); on a CUDA array it is a sync attributed to the first user
frame; on a CPU array, where CPU calls are counted, a would-sync-on-GPU event when user code made the
call. ``wp.synchronize*()`` is always a sync on a GPU (would-sync on a CPU-only machine).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from perfkit.collectors.sites import is_user_file
from perfkit.collectors import hub
from perfkit.collectors.hub import Patcher, call_original, direct_caller, emit, tls, wraps
from perfkit.collectors.torch_sync import api_sync_hook

FIXES = {
    "wp.synchronize()": "remove the device-wide synchronize from the step; order work with streams/events",
    "wp.synchronize_device()": "remove the synchronize from the step; order work with streams/events",
    "wp.synchronize_stream()": "order work with wp.wait_stream / events instead of blocking the host",
    "wp.synchronize_event()": "wait on the device (wp.wait_event) instead of blocking the host",
    "wp.array.numpy()": "keep data on the device (wp.to_torch for zero-copy); read back only for logging",
    "wp.array.list()": "keep data on the device; read back only for logging",
}


def _array_hook(orig: Callable, op: str) -> Callable:
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def hook(self, *args, **kwargs):
        if not sinks or state.depth or hub.is_compiling():
            return orig(self, *args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        device = getattr(self, "device", None)
        cuda = bool(getattr(device, "is_cuda", False))
        if not cuda and (not hub.count_cpu or not is_user_file(caller.f_code.co_filename)):
            return orig(self, *args, **kwargs)
        state.depth += 1
        try:
            emit("sync", op, caller, would=not cuda)
            return call_original(orig, op, (self, *args), kwargs)
        finally:
            state.depth -= 1

    return hook


def install(patcher: Patcher) -> None:
    import warp as wp

    for name in ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event"):
        orig = getattr(wp, name, None)
        if orig is not None:
            patcher.set(wp, name, api_sync_hook(orig, f"wp.{name}()"))
    arr = wp.array
    for name in ("numpy", "list"):
        orig = getattr(arr, name, None)
        if orig is not None:
            patcher.set(arr, name, _array_hook(orig, f"wp.array.{name}()"))


def originals() -> dict[str, Any]:
    import warp as wp

    out = {f"wp.{n}": getattr(wp, n) for n in ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")}
    out["wp.array.numpy"] = wp.array.numpy
    out["wp.array.list"] = wp.array.list
    return out
