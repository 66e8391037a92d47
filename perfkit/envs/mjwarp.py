"""GPU backend: MuJoCo Warp, one batch of ``nworld`` worlds.

* ``mujoco_warp.put_model`` / ``make_data(nworld=num_envs, nconmax=..., njmax=...)`` with the
  contact and constraint sizes from :mod:`perfkit.envs.models` (explicit, not Warp's guesses);
* ``qpos``, ``qvel``, ``qacc_warmstart`` and ``ctrl`` are torch views of the Warp arrays
  (``wp.to_torch``, zero-copy): the shared task code in :mod:`perfkit.envs.locomotion` reads and
  resets the physics state in place, and clipping the actions writes straight into ``d.ctrl``;
* the task's per-step work (terminations, reward, episode counters, masked reset, observations)
  runs as one Warp kernel (:mod:`perfkit.envs.task_kernel`) right after the substeps, instead of
  the ~30 small torch ops of :meth:`LocomotionEnv.task_step` that define it;
* on CUDA, the ``decimation`` substeps and the task kernel of one control step are captured once
  into a CUDA graph (``wp.ScopedCapture``) and replayed with ``wp.capture_launch`` on torch's
  *current* stream (``wp.stream_from_torch``), so Warp's kernels are ordered with the torch ops
  around them (action clamp, reset-target draw) and no cross-stream synchronisation is needed;
* on Warp's CPU device (tests, and comparisons with the ``mujoco`` backend) the same work runs
  uncaptured.
"""

from __future__ import annotations

import torch

from perfkit.envs.locomotion import LocomotionEnv


class MjWarpEnv(LocomotionEnv):
    backend = "mjwarp"

    def __init__(self, name: str, num_envs: int, device=None, seed: int = 0, capture: bool = True):
        self._capture = capture
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        super().__init__(name, num_envs, device, seed)

    def _init_physics(self, mjm) -> None:
        import warp as wp

        if wp.config.log_level == wp.LOG_INFO:  # Warp's default: one line per module built/loaded
            wp.config.log_level = wp.LOG_WARNING
        import mujoco_warp as mjw

        wp.init()
        self._wp = wp
        self._mjw = mjw
        self._wp_device = wp.device_from_torch(self.device)
        with wp.ScopedDevice(self._wp_device):
            self._m = mjw.put_model(mjm)
            # A fixed solver iteration budget is a design choice here (as in MuJoCo C, which
            # stops silently): do not printf from the kernels each time it or the line search is reached
            # (a device printf per world per substep floods the log and costs GPU time; the overflow
            # flags are still set in d.overflow).
            self._m.opt.warn_overflow = int(self._m.opt.warn_overflow) & ~int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
            self._d = mjw.make_data(mjm, nworld=self.num_envs, nconmax=self.spec.nconmax, njmax=self.spec.njmax)
        self.qpos = wp.to_torch(self._d.qpos)
        self.qvel = wp.to_torch(self._d.qvel)
        self._qacc_warmstart = wp.to_torch(self._d.qacc_warmstart)
        # Clipped actions land directly in MuJoCo Warp's control buffer.
        self.actions = wp.to_torch(self._d.ctrl)
        self._graph = None
        self._wp_stream = None
        self._torch_stream_handle = None

    def _after_init(self) -> None:
        from perfkit.envs.task_kernel import TaskKernel

        self._task = TaskKernel(self, self._qacc_warmstart, self._wp_device)
        # Run one control step uncaptured first: it compiles and loads every Warp module the step
        # uses (a capture may not load modules), then capture the same work into a graph. Both run
        # on Warp's own stream (torch's default stream cannot be captured), fenced by device syncs
        # from the torch work around them: set-up, not steps.
        cuda = self._wp_device.is_cuda
        if cuda:
            torch.cuda.synchronize(self.device)
        with self._wp.ScopedDevice(self._wp_device):
            self._physics_and_task()
            if cuda and self._capture:
                with self._wp.ScopedCapture(device=self._wp_device) as capture:
                    self._physics_and_task()
                self._graph = capture.graph
            self._wp.synchronize_device(self._wp_device)
        self.reset()

    def _substeps(self) -> None:
        for _ in range(self.decimation):
            self._mjw.step(self._m, self._d)

    def _physics_and_task(self) -> None:
        self._substeps()
        self._task.launch()

    def _simulate(self) -> None:
        """Physics alone (the backend contract of ``LocomotionEnv``); ``step`` goes through
        ``_advance``, which runs the task kernel after the substeps."""
        with self._on_torch_stream():
            self._substeps()

    def _advance(self) -> None:
        if self._graph is not None:
            self.physics_launch()
        else:
            with self._on_torch_stream():
                self._physics_and_task()

    def _on_torch_stream(self):
        """Warp's scope for uncaptured launches: this device, and on CUDA torch's current stream."""
        if self._wp_device.is_cuda:
            return self._wp.ScopedStream(self._torch_wp_stream())
        return self._wp.ScopedDevice(self._wp_device)

    def _torch_wp_stream(self):
        stream = torch.cuda.current_stream(self.device)
        if stream.cuda_stream != self._torch_stream_handle:
            self._wp_stream = self._wp.stream_from_torch(stream)
            self._torch_stream_handle = stream.cuda_stream
        return self._wp_stream

    def physics_launch(self) -> None:
        """Replay the captured graph (physics substeps + task kernel) on torch's current stream
        (CUDA only)."""
        self._wp.capture_launch(self._graph, stream=self._torch_wp_stream())

    def _reset_physics_extras(self, mask_col: torch.Tensor) -> None:
        self._qacc_warmstart.masked_fill_(mask_col, 0.0)

    @property
    def captured(self) -> bool:
        """True when ``step`` replays a CUDA graph."""
        return self._graph is not None
