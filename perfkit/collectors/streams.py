"""Stream hazards: Warp work launched on a stream that nothing orders with torch's current one while the
two share memory (``wp.to_torch`` / ``wp.from_torch``).

Warp's default stream on a device is its own, not torch's. Whether that races depends on the streams'
kinds: CUDA's *legacy default stream* (stream 0, where torch runs unless told otherwise) waits for
and is waited on by every *blocking* stream, and Warp creates its streams blocking — so Warp on its
stream and torch on the legacy default stream are ordered (measured on the H200: every element right).
A launch is a hazard when the streams are really unordered: torch on a side stream (or the per-thread
default stream) while Warp is on another, or Warp on a non-blocking stream. ``wp.to_torch`` and
``wp.from_torch`` are wrapped for the whole session (they run rarely: zero-copy views are made once)
to learn that sharing happens; then, on sampled steps only, ``wp.launch`` and ``wp.capture_launch`` are
wrapped to compare the launch stream with ``torch.cuda.current_stream()``. Each mismatching launch is
one ``stream`` event at the first user frame.
"""

from __future__ import annotations

import sys
from typing import Any

from perfkit.collectors import hub
from perfkit.collectors.hub import emit, tls
from perfkit.collectors.patches import Patcher, wraps

FIX = ("run Warp on torch's stream: `with wp.ScopedStream(wp.stream_from_torch()):` around the Warp work, "
       "or synchronize the streams with events")


class StreamMonitor:
    installed = False  # install() wrapped the interop calls

    def __init__(self) -> None:
        self.interop_sites: dict[tuple, int] = {}
        self._launch_patcher: Patcher | None = None

    def install(self, patcher: Patcher) -> bool:
        """Wrap the interop calls (needs warp imported); True once installed."""
        wp = sys.modules.get("warp")
        if wp is None:
            return False
        from perfkit.collectors.sites import site_of

        sites = self.interop_sites

        def interop(orig, name):
            @wraps(orig)
            def hook(*args, **kwargs):
                if not tls.depth:
                    key = (name, *site_of(sys._getframe(1)))
                    sites[key] = sites.get(key, 0) + 1
                return orig(*args, **kwargs)

            return hook

        with patcher.batch():  # both functions' aliases in one pass over the loaded modules
            for name in ("to_torch", "from_torch"):
                orig = getattr(wp, name, None)
                if orig is not None:
                    patcher.set_everywhere(wp, name, interop(orig, name))
        self.installed = True
        return True

    def start(self) -> None:
        """Begin checking launches (a sampled step), when sharing was seen and CUDA is in use."""
        if not self.interop_sites or self._launch_patcher is not None:
            return
        wp, torch = sys.modules.get("warp"), sys.modules.get("torch")
        if wp is None or torch is None or not torch.cuda.is_available():
            return
        p = self._launch_patcher = Patcher()
        current_stream = torch.cuda.current_stream

        def check(stream: Any, device: Any, frame) -> None:
            try:
                dev = wp.get_device(device)
                if not dev.is_cuda:
                    return
                if stream is None:
                    stream = dev.stream
                torch_stream = current_stream(dev.ordinal).cuda_stream
                if not ordered(int(stream.cuda_stream), int(torch_stream), stream_flags):
                    emit("stream", "Warp launch off torch's stream", frame)
            except Exception:  # never break the user's launch
                pass

        launch = wp.launch

        @wraps(launch)
        def launch_hook(*args, **kwargs):
            if hub.sinks and not tls.depth:
                check(kwargs.get("stream"), kwargs.get("device"), sys._getframe(1))
            return launch(*args, **kwargs)

        capture_launch = wp.capture_launch

        @wraps(capture_launch)
        def capture_launch_hook(graph, stream=None, *args, **kwargs):
            if hub.sinks and not tls.depth:
                check(stream, getattr(graph, "device", None), sys._getframe(1))
            return capture_launch(graph, stream, *args, **kwargs)

        p.set(wp, "launch", launch_hook)
        p.set(wp, "capture_launch", capture_launch_hook)

    def stop(self) -> None:
        if self._launch_patcher is not None:
            self._launch_patcher.undo()
            self._launch_patcher = None


LEGACY_DEFAULT = 0  # cudaStreamLegacy as torch reports it (current_stream().cuda_stream == 0)
NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING


def ordered(a: int, b: int, flags: Any) -> bool:
    """Whether work on streams ``a`` and ``b`` (raw CUDA stream handles) is ordered by CUDA itself: the
    same stream, or the legacy default stream with a blocking stream. ``flags(handle)`` gives a
    stream's creation flags (None when unknown: taken as blocking, Warp's kind)."""
    if a == b:
        return True
    if a == LEGACY_DEFAULT or b == LEGACY_DEFAULT:
        other = b if a == LEGACY_DEFAULT else a
        f = flags(other)
        return f is None or not (f & NON_BLOCKING)
    return False


_flags_cache: dict[int, int | None] = {}


def stream_flags(handle: int) -> int | None:
    """A CUDA stream's creation flags through the driver (``cuStreamGetFlags``); None when unknown."""
    if handle in _flags_cache:
        return _flags_cache[handle]
    value = None
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        out = ctypes.c_uint(0)
        if lib.cuStreamGetFlags(ctypes.c_void_p(handle), ctypes.byref(out)) == 0:
            value = int(out.value)
    except Exception:
        value = None
    _flags_cache[handle] = value
    return value
