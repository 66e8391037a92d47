"""PK4xx (measurement bugs) and PK5xx (stream hazards): these apply everywhere, hot or not."""

from __future__ import annotations

import textwrap

from perfkit.lint import lint_source
from .helpers import findings, rules_of


def test_clock_after_gpu_work_without_sync():
    src = """
    import time
    import torch
    def bench(env, actions):
        t0 = time.perf_counter()
        for _ in range(100):
            env.step(actions)
        return time.perf_counter() - t0
    """
    assert findings(src) == [(8, "PK401")]


def test_clock_after_sync_is_fine():
    src = """
    import time
    import torch
    def bench(env, actions):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(100):
            env.step(actions)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    """
    assert rules_of(src) == []


def test_a_read_back_or_sync_helper_counts_as_a_sync():
    src = """
    import time
    import torch
    class B:
        def sync(self):
            torch.cuda.synchronize()
        def run(self, x: torch.Tensor):
            t0 = time.time()
            y = x @ x
            self.sync()
            t1 = time.time()
            z = x @ x
            v = z.sum().item()
            t2 = time.time()
            return t1 - t0, t2 - t1, v
    """
    assert rules_of(src) == []


def test_tensor_arithmetic_is_gpu_work():
    src = """
    import time
    import torch
    x = torch.randn(64, 64, device="cuda")
    t0 = time.time()
    y = x @ x
    dt = time.time() - t0
    """
    assert findings(src) == [(7, "PK401")]


def test_timing_pure_python_or_a_capture_is_fine():
    src = """
    import time
    import torch
    import warp as wp
    def build(m, d, mjw):
        t0 = time.perf_counter()
        cfg = dict(a=1)
        t1 = time.perf_counter()
        with wp.ScopedCapture() as cap:
            mjw.step(m, d)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1
    """
    assert rules_of(src) == []


def test_deadline_checks_are_not_measurements():
    src = """
    import time
    import torch
    def loop(env, a, deadline):
        t0 = time.perf_counter()
        while True:
            env.step(a)
            if time.perf_counter() > deadline:
                break
    """
    assert rules_of(src) == []


def test_no_torch_no_timing_rule():
    src = """
    import time
    def f(g):
        t0 = time.time()
        g.step()
        return time.time() - t0
    """
    assert rules_of(src) == []


def test_elapsed_time_without_sync():
    src = """
    import torch
    def f(x):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        y = x @ x
        e.record()
        bad = s.elapsed_time(e)
        e.synchronize()
        good = s.elapsed_time(e)
        e.record()
        if e.query():
            ok = s.elapsed_time(e)
    """
    assert findings(src) == [(9, "PK402")]


WARP_TORCH = """
import torch
import warp as wp
class E:
    def __init__(self):
        self.a = wp.zeros(8, dtype=float)
        self.t = wp.to_torch(self.a)
        self.side = torch.cuda.Stream()
"""


def test_launch_on_warps_stream_while_torch_works_on_a_side_stream():
    src = WARP_TORCH + """
    def setup(self):
        wp.launch(k, dim=8, inputs=[self.a])
        wp.capture_launch(self.g)
    def read(self):
        with torch.cuda.stream(self.side):
            return self.t * 2
"""
    got = lint_source(textwrap.dedent(src), "t.py")
    assert [(v.line, v.rule, v.severity) for v in got] == [(11, "PK501", "error"), (12, "PK501", "error")]


def test_launch_on_warps_blocking_stream_with_torch_on_the_legacy_default_stream_is_ordered():
    # measured on an H200: the legacy default stream waits for Warp's blocking stream, so no race
    src = WARP_TORCH.replace("        self.side = torch.cuda.Stream()\n", "") + """
    def setup(self):
        wp.launch(k, dim=8, inputs=[self.a])
        wp.capture_launch(self.g)
    def read(self):
        return self.t * 2
"""
    assert rules_of(src) == []


def test_launch_on_torchs_stream_is_fine():
    src = WARP_TORCH + """
    def a(self):
        wp.launch(k, dim=8, inputs=[self.a], stream=wp.stream_from_torch())
    def b(self):
        with wp.ScopedStream(wp.stream_from_torch()):
            wp.launch(k, dim=8, inputs=[self.a])
            self.c()
    def c(self):
        wp.capture_launch(self.g)
"""
    assert rules_of(src) == []


def test_launch_without_sharing_is_fine():
    src = """
    import warp as wp
    def f(a):
        wp.launch(k, dim=8, inputs=[a])
    """
    assert rules_of(src) == []
