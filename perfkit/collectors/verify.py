"""``--verify``: did the hooks see every sync the CUDA runtime actually made?

Over a window of steady-state steps, torch.profiler (CUPTI through Kineto) records the runtime and
driver API calls; each hooked sync runs inside a ``perfkit.sync:<op>`` range and each step inside a
``perfkit.step#k`` range (``torch.profiler.record_function``). Afterwards every synchronizing API call
(``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, synchronous
``cudaMemcpy``, and their driver-API twins used by Warp) that falls inside a step range is matched by
time against the sync ranges: inside one → attributed; outside all → *unattributed* (a sync no hook
saw). The target is zero unattributed syncs per step.

The profiler costs far more than perfkit's default mode, so ``--verify`` is a check, not a measurement:
the window's steps still count in the run's step times (they are steady-state steps), which is why
the verify window is kept short (``verify_steps``, default 20).
"""

from __future__ import annotations

from typing import Any

from perfkit.collectors import hub

SYNC_API = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2",
    "cuMemcpy", "cuMemcpy_v2",
}
SYNC_PREFIX = "perfkit.sync:"
STEP_PREFIX = "perfkit.step#"


class Verifier:
    def __init__(self, torch: Any, steps: int = 20):
        self.torch = torch
        self.steps = steps
        self.prof: Any = None
        self.start_idx = 0
        self._step_rf: Any = None
        self._result: dict[str, Any] | None = None
        self.hooked = 0

    def start(self, idx: int) -> None:
        P = self.torch.profiler
        self.prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA])
        self.prof.__enter__()
        self.start_idx = idx
        hub.verify_range = self._sync_range

    def _sync_range(self, op: str) -> Any:
        return self.torch.profiler.record_function(SYNC_PREFIX + op)

    def note_sync(self) -> None:
        if self.prof is not None:
            self.hooked += 1

    def boundary(self, idx: int) -> None:
        if self.prof is None:
            return
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
        if idx >= self.start_idx + self.steps:
            self.stop()
            return
        self._step_rf = self.torch.profiler.record_function(f"{STEP_PREFIX}{idx}")
        self._step_rf.__enter__()

    def stop(self) -> None:
        if self.prof is None:
            return
        hub.verify_range = None
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
        prof, self.prof = self.prof, None
        prof.__exit__(None, None, None)
        self._result = analyze(prof.events())

    def result(self) -> dict[str, Any]:
        return self._result or {"steps": 0, "note": "the run ended before the verify window"}


def analyze(events: Any) -> dict[str, Any]:
    """Match runtime sync calls against perfkit's sync ranges inside step ranges (see module doc)."""
    steps, syncs, api = [], [], []
    for e in events:
        name = e.name
        tr = e.time_range
        if name.startswith(STEP_PREFIX):
            steps.append((tr.start, tr.end))
        elif name.startswith(SYNC_PREFIX):
            syncs.append((tr.start, tr.end, name[len(SYNC_PREFIX):]))
        elif name in SYNC_API:
            api.append((tr.start, tr.end, name))
    syncs.sort()
    eps = 1.0  # µs of slack at range edges

    def within(t0: float, t1: float, ranges) -> Any:
        for r in ranges:
            if r[0] - eps <= t0 and t1 <= r[1] + eps:
                return r
        return None

    by_name: dict[str, dict[str, int]] = {}
    unattributed = []
    n_api = 0
    for t0, t1, name in api:
        if within(t0, t1, steps) is None:
            continue  # the profiler's own start/stop, or outside the window
        n_api += 1
        d = by_name.setdefault(name, {"total": 0, "attributed": 0})
        d["total"] += 1
        r = within(t0, t1, syncs)
        if r is not None:
            d["attributed"] += 1
        else:
            unattributed.append({"api": name, "t_us": round(t0, 1)})
    n_steps = len(steps)
    return {
        "steps": n_steps,
        "runtime_syncs": n_api,
        "hooked_syncs": len(syncs),
        "unattributed": len(unattributed),
        "unattributed_per_step": round(len(unattributed) / n_steps, 4) if n_steps else None,
        "by_api": by_name,
        "unattributed_samples": unattributed[:20],
    }
