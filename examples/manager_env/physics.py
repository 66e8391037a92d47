"""The simulator under the manager env: perfkit's reference physics, without the reference task.

:mod:`perfkit.envs` pairs each physics backend with its own locomotion task (reward, termination,
reset, observations; on MuJoCo Warp a task kernel captured in the physics CUDA graph). The manager
env brings its own task, in torch, so it needs the physics alone. The two classes here subclass the
backends through their documented hooks (``_after_init``, ``_simulate``, ``_write_ctrl``) and expose:

* ``qpos`` ``[N, nq]`` and ``qvel`` ``[N, nv]``: torch views of the simulator's state (zero-copy;
  float32 on MuJoCo Warp, float64 on MuJoCo C), read and written in place by the env;
* ``ctrl`` ``[N, nu]``: the control held over the ``decimation`` substeps of one env step;
* ``simulate()``: one env step of physics. On CUDA that is **one CUDA-graph launch** (the substeps
  captured once, replayed on torch's current stream); on MuJoCo C, one ``mujoco.rollout`` call;
* ``reset_solver(env_ids)``: clear the solver's warm start of the worlds being reset.

The reference env's own buffers still exist on these objects (they are allocated by the shared
base class) but nothing here reads or steps them.
"""

from __future__ import annotations

import torch

from perfkit.envs.mjwarp import MjWarpEnv
from perfkit.envs.mujoco_cpu import MujocoEnv


class MjWarpPhysics(MjWarpEnv):
    """MuJoCo Warp: the ``decimation`` substeps captured as one CUDA graph (no task kernel)."""

    def _after_init(self) -> None:
        # As MjWarpEnv does, but capture the physics substeps alone: run them once uncaptured (it
        # compiles and loads every Warp module they use), then capture the same launches.
        cuda = self._wp_device.is_cuda
        if cuda:
            torch.cuda.synchronize(self.device)
        with self._wp.ScopedDevice(self._wp_device):
            self._substeps()
            if cuda and self._capture:
                with self._wp.ScopedCapture(device=self._wp_device) as capture:
                    self._substeps()
                self._graph = capture.graph
            self._wp.synchronize_device(self._wp_device)

    @property
    def ctrl(self) -> torch.Tensor:
        return self.actions  # a view of MuJoCo Warp's d.ctrl

    def simulate(self) -> None:
        if self._graph is not None:
            self.physics_launch()
        else:
            self._simulate()

    def reset_solver(self, env_ids: torch.Tensor) -> None:
        self._qacc_warmstart[env_ids] = 0.0


class MujocoPhysics(MujocoEnv):
    """MuJoCo C through ``mujoco.rollout`` (CPU); each rollout starts from a zero warm start."""

    @property
    def ctrl(self) -> torch.Tensor:
        return self.actions

    def simulate(self) -> None:
        self._write_ctrl()
        self._simulate()

    def reset_solver(self, env_ids: torch.Tensor) -> None:
        pass


def make_physics(model: str, num_envs: int, backend: str = "auto", device=None, seed: int = 0):
    """``MjWarpPhysics`` (``backend="mjwarp"``) or ``MujocoPhysics`` (``"mujoco"``); ``"auto"`` picks
    MuJoCo Warp when CUDA is available and ``device`` is not the CPU."""
    if backend not in ("auto", "mjwarp", "mujoco"):
        raise ValueError(f"backend must be 'auto', 'mjwarp' or 'mujoco', got {backend!r}")
    if backend == "auto":
        wants_cpu = device is not None and torch.device(device).type == "cpu"
        backend = "mjwarp" if torch.cuda.is_available() and not wants_cpu else "mujoco"
    if backend == "mujoco":
        return MujocoPhysics(model, num_envs, device="cpu" if device is None else device, seed=seed)
    return MjWarpPhysics(model, num_envs, device=device, seed=seed)
