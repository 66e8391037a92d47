"""Sync hooks for NVIDIA Warp: ``wp.synchronize*()`` and reading an array back (``.numpy()``, ``.list()``).

Same counting rules as :mod:`perfkit.collectors.torch_sync`: one call is one event (``.list()`` calls
``.numpy()`` inside: one ``.list()``); on a CUDA array it is a sync attributed to the first user
frame; on a CPU array, where CPU calls are counted, a would-sync-on-GPU event when user code made the
call. ``wp.synchronize*()`` is always a sync on a GPU (would-sync on a CPU-only machine).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from perfkit.collectors.sites import reportable
from perfkit.collectors import hub
from perfkit.collectors.hub import api_sync_hook, direct_caller, sync_call, tls
from perfkit.collectors.patches import Patch, Patcher, wraps
from perfkit.collectors.patches import fixes as _fixes
from perfkit.collectors.patches import install as _install
from perfkit.collectors.patches import originals as _originals


def _array_hook(orig: Callable, op: str) -> Callable:
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def hook(self, *args, **kwargs):
        if not sinks or state.depth or hub.is_compiling():
            return orig(self, *args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        device = getattr(self, "device", None)
        cuda = bool(getattr(device, "is_cuda", False))
        if not cuda and (not hub.count_cpu or not reportable(caller.f_code.co_filename)):
            return orig(self, *args, **kwargs)
        return sync_call(orig, op, caller, (self, *args), kwargs, would=not cuda)

    return hook


def _api(orig, p: Patch, wp) -> Callable:
    return api_sync_hook(orig, p.op)


def _array(orig, p: Patch, wp) -> Callable:
    return _array_hook(orig, p.op)


PATCHES: tuple[Patch, ...] = (
    Patch("", "synchronize", "wp.synchronize()", "remove the device-wide synchronize from the step; order work with streams/events", _api),
    Patch("", "synchronize_device", "wp.synchronize_device()", "remove the synchronize from the step; order work with streams/events", _api),
    Patch("", "synchronize_stream", "wp.synchronize_stream()", "order work with wp.wait_stream / events instead of blocking the host", _api),
    Patch("", "synchronize_event", "wp.synchronize_event()", "wait on the device (wp.wait_event) instead of blocking the host", _api),
    Patch("array", "numpy", "wp.array.numpy()", "keep data on the device (wp.to_torch for zero-copy); read back only for logging", _array),
    Patch("array", "list", "wp.array.list()", "keep data on the device; read back only for logging", _array),
)

FIXES = _fixes(PATCHES)
"""op -> the fix in words (a finding's ``message``)."""


def install(patcher: Patcher) -> list[str]:
    import warp as wp

    return _install(patcher, wp, PATCHES)


def originals() -> dict[str, Any]:
    """Every attribute :data:`PATCHES` replaces, as it is now (the restore check compares before/after)."""
    import warp as wp

    return _originals(wp, PATCHES)
