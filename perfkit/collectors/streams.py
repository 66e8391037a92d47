"""Stream hazards: Warp work launched on a stream other than torch's current one while the two share
memory (``wp.to_torch`` / ``wp.from_torch``).

Warp's default stream on a device is its own, not torch's: a kernel Warp launches there reads or writes
a buffer torch is still writing on its stream, with nothing ordering the two. ``wp.to_torch`` and
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

        for name in ("to_torch", "from_torch"):
            orig = getattr(wp, name, None)
            if orig is not None:
                patcher.set_everywhere(wp, name, interop(orig, name))
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
                if int(stream.cuda_stream) != int(torch_stream):
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
