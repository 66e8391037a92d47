"""Sampled steps: where the costly collectors run.

Counting every allocation (a ``TorchFunctionMode`` on every torch call), tracing lines for per-env
loops and checking Warp launch streams cost far too much to leave on; :class:`Sampler` turns them on
for the steps the session samples and off again, and keeps which steps those were.
"""

from __future__ import annotations

from typing import Any

from perfkit.collectors.loops import LineSampler
from perfkit.collectors.streams import StreamMonitor


class Sampler:
    def __init__(self, torch: Any, lines: LineSampler, streams: StreamMonitor):
        self.torch = torch
        self.lines = lines
        self.streams = streams
        self.active = False
        self.done: list[int] = []  # the steps sampled so far
        self.op_counts: dict[tuple[str, int], int] = {}  # (file, line) -> torch calls on sampled steps
        self.cuda_alloc: list[int] = []  # the CUDA allocator's allocations on each sampled step
        self.notes: list[str] = []
        self._index = 0
        self._mode: Any = None
        self._cuda_start: int | None = None

    def start(self, frame: Any, index: int) -> None:
        if self.active:
            return
        self.active = True
        self._index = index
        self._cuda_start = None
        if self.torch is not None:
            from perfkit.collectors.alloc import alloc_mode, cuda_alloc_counter

            self._cuda_start = cuda_alloc_counter()
            self._mode = alloc_mode(self.op_counts, exact=False)  # results only: the allocator is read per step
            self._mode.__enter__()
        self.lines.start(frame)
        self.streams.start()

    def stop(self) -> None:
        if not self.active:
            return
        self.lines.stop()
        self.streams.stop()
        if self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception as e:  # another mode was pushed on top and not popped
                self.notes.append(f"allocation sampling could not be closed cleanly: {e}")
            self._mode = None
            from perfkit.collectors.alloc import cuda_alloc_counter

            end = cuda_alloc_counter()
            if end is not None and self._cuda_start is not None:
                self.cuda_alloc.append(end - self._cuda_start)
        self.done.append(self._index)
        self.active = False
