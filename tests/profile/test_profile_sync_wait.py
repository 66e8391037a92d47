"""Per-sync wait time and the host work after it (``run.extra["sync_wait"]``)."""
from __future__ import annotations

import time

import perfkit
from perfkit.collectors import hub, torch_sync
from perfkit.profile.session import Session

from _helpers import line_of


class _DeviceValue:
    """Stands in for a CUDA tensor: its read blocks the host like a sync that drains queued work."""
    is_cuda = True

    def read(self, ms):
        time.sleep(ms / 1e3)
        return 1.0


def _spin(ms):
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_sync_wait_and_gap_after_per_site():
    read = torch_sync.sync_hook(_DeviceValue.read, ".item()")
    v = _DeviceValue()
    with Session(warmup_steps=2, sample_steps=()) as s:
        for i in range(12):
            perfkit.step()
            read(v, 2.0)  # site A
            _spin(3.0)
            if i % 2 == 0:
                read(v, 1.0)  # site B
            _spin(1.0)
    sw = s.run.extra["sync_wait"]
    a = next(d for k, d in sw.items() if k.endswith(f":{line_of(__file__, '# site A')}"))
    b = next(d for k, d in sw.items() if k.endswith(f":{line_of(__file__, '# site B')}"))
    assert a["calls_per_step"] == 1.0 and b["calls_per_step"] == 0.5
    # the spins last at least this long, however loaded the machine (the arithmetic of waits and gaps on
    # injected times: test_collector_units.py); no upper bound: a loaded machine stretches every spin
    assert a["wait_ms_per_step"] >= 1.9  # one 2 ms wait per step
    assert b["wait_ms_per_step"] >= 0.45  # a 1 ms wait every other step
    assert a["gap_ms_per_step_after"] >= 2.9  # 3 ms of host work until B (or 4 ms to the step end)
    assert b["gap_ms_per_step_after"] >= 0.45  # 1 ms to the step end, every other step
    assert not hub.wait_listeners  # the session's listener is gone


def test_a_sessions_record_counts_a_sites_consecutive_calls_as_one_burst():
    read = torch_sync.sync_hook(_DeviceValue.read, ".item()")
    v = _DeviceValue()
    with Session(warmup_steps=1, sample_steps=()) as s:
        for _ in range(6):
            perfkit.step()
            for _ in range(3):
                read(v, 0.1)  # site C: three in a row, one burst a step
            read(v, 0.1)  # site D
    sw = s.run.extra["sync_wait"]
    c = next(d for k, d in sw.items() if k.endswith(f":{line_of(__file__, '# site C')}"))
    d = next(d for k, d in sw.items() if k.endswith(f":{line_of(__file__, '# site D')}"))
    assert c["calls_per_step"] == 3.0 and c["bursts"]["per_step"] == 1.0
    assert c["bursts"]["fit"]["calls"] + c["bursts"]["over"]["calls"] == 3.0
    assert d["bursts"]["per_step"] == 1.0 and d["bursts"]["fit"]["calls"] + d["bursts"]["over"]["calls"] == 1.0


def test_would_sync_events_are_not_timed():
    import torch

    with Session(warmup_steps=1, sample_steps=(), count_cpu_tensors=True) as s:
        t = torch.ones(3)
        for _ in range(5):
            perfkit.step()
            t.sum().item()
    assert s.run.findings_of("sync") and "sync_wait" not in s.run.extra
