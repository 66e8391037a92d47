"""The session's GPU side on steady steps: which steps the CUDA-event timer times (every
``timing_every``-th steady step that is not sampled), NVTX ranges (on those steps, or on every step
under a profiler tool), and the ``--verify`` window (from the first steady step to the end of the run,
or past ``verify_steps`` to a whole period of the loop: :class:`perfkit.collectors.verify.Verifier`).
Without CUDA it does nothing but say so.

The session's scheduler asks it at each special boundary (:meth:`GpuSteps.boundary`), starts the timed
step once its own work there is done (:meth:`GpuSteps.begin`) and closes it at the next
(:meth:`GpuSteps.close`)."""

from __future__ import annotations

from typing import Any

from perfkit.collectors.timing import CudaEventTimer, GpuSummary, SegmentClock, nvtx_wanted


class GpuSteps:
    def __init__(self, segclock: SegmentClock, *, timing_every: int, nvtx: str | None, verify: bool,
                 verify_steps: int, timeline_limit: int):
        self.torch: Any = None  # the torch module, once set up
        self.segclock = segclock
        self.timing_every = timing_every
        self.verify_wanted = verify
        self.verify_steps = verify_steps
        self.timeline_limit = timeline_limit
        self.nvtx_mode = nvtx_wanted(nvtx)
        self.timer: CudaEventTimer | None = None
        self.nvtx: Any = None  # the nvtx module, when ranges are emitted
        self.pending: int | None = None  # the step to time once perfkit's work at its boundary is done
        self.verifier: Any = None  # the --verify window's Verifier, once started

    def setup(self, torch: Any, t0: float) -> list[str]:
        """Find CUDA (and nvtx) through ``torch`` (None: not installed); ``t0``: the session's start.
        Returns notes for the record."""
        self.torch, notes = torch, []
        if torch is None or not torch.cuda.is_available():
            return ["--verify needs CUDA; skipped on this machine"] if self.verify_wanted else []
        self.timer = CudaEventTimer(torch)
        self.timer.t0 = t0
        self.timer.timeline_limit = self.timeline_limit
        if self.nvtx_mode != "off":
            try:
                import nvtx

                self.nvtx = nvtx
            except ImportError:
                notes.append("nvtx is not installed: no NVTX ranges")
        if self.nvtx_mode == "always" and self.nvtx is not None:
            self.segclock.nvtx_on(self.nvtx)
        self.segclock.gpu = self.timer
        return notes

    @property
    def verifying(self) -> bool:
        """Whether the --verify window is open."""
        return self.verifier is not None and self.verifier.prof is not None

    def verify_holds(self, idx: int, warmup_steps: int) -> bool:
        """Whether step ``idx`` is kept out of the timing for --verify (the steps after warm-up)."""
        if not (self.verify_wanted and self.timer is not None):
            return False
        v = self.verifier
        if v is not None:  # the window's own steps
            return v.holds(idx)
        return idx > warmup_steps  # the window opens at the first steady step

    def boundary(self, idx: int, steady_i: int, sampled: bool, period: int | None) -> bool:
        """Steady step ``idx`` (the ``steady_i``-th) begins: resolve finished timed steps, choose whether
        this one is timed, open or advance the --verify window. True: the scheduler must see the next
        boundary (this step is timed, or --verify needs it)."""
        timer = self.timer
        if timer is None or not self.torch.cuda.is_initialized():  # else creating events would initialize CUDA
            return False
        need_next = False
        timer.poll()
        if (steady_i - 1) % self.timing_every == 0 and not sampled:
            self.pending = idx  # its first event is recorded once perfkit's work here is done
            if self.nvtx_mode == "sampled" and self.nvtx is not None:
                self.segclock.nvtx_on(self.nvtx)
            need_next = True  # close the timed step at the next boundary
        if self.verify_wanted and self.verifier is None:
            from perfkit.collectors.verify import Verifier

            self.verifier = Verifier(self.torch, max_steps=self.verify_steps)
            self.verifier.start(idx)
        if self.verifier is not None:
            self.verifier.boundary(idx, period)
            need_next = need_next or self.verifier.prof is not None
        return need_next

    def begin(self, t: float) -> bool:
        """The step begins at ``t`` (after perfkit's work at its boundary); True when it is GPU-timed."""
        if self.timer is None or self.pending is None:
            return False
        self.timer.begin_step(self.pending, self.segclock.cur, t)
        self.segclock.refresh()
        self.pending = None
        return True

    def close(self, rewound: bool, t: float | None = None) -> None:
        """The step ends (at ``t``); ``rewound``: its end was moved back to when its call returned (its
        events ran on into the program's teardown: the step is given up)."""
        timer = self.timer
        if timer is None or not timer.active:
            return
        if rewound:
            timer.drop_step()
        else:
            timer.end_step(t)
        self.segclock.refresh()
        if self.nvtx_mode == "sampled":
            self.segclock.nvtx_off()

    def stop(self) -> None:
        if self.verifier is not None:
            self.verifier.stop()

    def summary(self) -> GpuSummary | None:
        return self.timer.summary() if self.timer is not None else None

    def verify_result(self) -> dict[str, Any] | None:
        return self.verifier.result() if self.verifier is not None else None
