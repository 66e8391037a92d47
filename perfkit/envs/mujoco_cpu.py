"""CPU backend: MuJoCo (C) through ``mujoco.rollout``'s thread pool.

One control step is one ``rollout`` call of ``decimation`` steps over all worlds (the C++ side
splits the worlds over threads). The numpy arrays ``rollout`` reads and writes are allocated once;
torch sees them through ``torch.from_numpy`` views made in ``__init__``, so the exchange in ``step``
is in-place ``copy_`` only — no ``.numpy()`` on a tensor, no new tensor.

State layout: MuJoCo's ``mjSTATE_FULLPHYSICS`` vector ``[time, qpos, qvel, act, ...]`` per world,
float64. ``qpos``/``qvel`` are views into it, the same ``[N, nq]``/``[N, nv]`` layout as the
MuJoCo Warp backend (which is float32).

Each rollout starts the constraint solver from a zero warm start (``initial_warmstart``), which
keeps results independent of which thread stepped which world (deterministic for a seed).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from perfkit.envs.locomotion import LocomotionEnv


class MujocoEnv(LocomotionEnv):
    backend = "mujoco"

    def __init__(self, name: str, num_envs: int, device="cpu", seed: int = 0, nthread: int | None = None):
        self._nthread_arg = nthread
        super().__init__(name, num_envs, "cpu" if device is None else device, seed)

    def _init_physics(self, mjm) -> None:
        import mujoco
        import mujoco.rollout

        if self.device.type != "cpu":
            raise ValueError(f"the 'mujoco' backend runs on the CPU: device must be 'cpu', got {self.device}")
        n, dec = self.num_envs, self.decimation
        nthread = self._nthread_arg if self._nthread_arg is not None else (os.cpu_count() or 1)
        nthread = max(0, min(int(nthread), n)) if n > 1 else 0
        self._mjm = mjm
        self._models = [mjm] * n
        self._datas = [mujoco.MjData(mjm) for _ in range(max(1, nthread))]
        self._rollout = mujoco.rollout.Rollout(nthread=nthread)
        self._nstep = dec

        full = mujoco.mjtState.mjSTATE_FULLPHYSICS
        nstate = mujoco.mj_stateSize(mjm, full)
        qpos_at = mujoco.mj_stateSize(mjm, mujoco.mjtState.mjSTATE_TIME)
        qvel_at = qpos_at + mjm.nq
        probe = mujoco.MjData(mjm)
        state0 = np.empty(nstate)
        mujoco.mj_getState(mjm, probe, state0, full)

        self._state_np = np.tile(state0, (n, 1))
        self._traj_np = np.zeros((n, dec, nstate))
        self._control_np = np.zeros((n, dec, mjm.nu))
        self._warmstart_np = np.zeros((n, mjm.nv))
        self._sensor_np = np.zeros((n, dec, mjm.nsensordata))

        self._state = torch.from_numpy(self._state_np)
        self._traj_last = torch.from_numpy(self._traj_np)[:, -1]
        self._control = torch.from_numpy(self._control_np)
        self.qpos = self._state[:, qpos_at : qpos_at + mjm.nq]
        self.qvel = self._state[:, qvel_at : qvel_at + mjm.nv]
        self.actions = torch.zeros((n, mjm.nu), dtype=torch.float32)
        # The same action is held over the decimation substeps: a broadcast view, made once.
        self._actions_held = self.actions.unsqueeze(1).expand(n, dec, mjm.nu)

    def _write_ctrl(self) -> None:
        self._control.copy_(self._actions_held)

    def _simulate(self) -> None:
        self._rollout.rollout(
            self._models,
            self._datas,
            self._state_np,
            self._control_np,
            skip_checks=True,
            nstep=self._nstep,
            initial_warmstart=self._warmstart_np,
            state=self._traj_np,
            sensordata=self._sensor_np,
        )
        self._state.copy_(self._traj_last)

    def close(self) -> None:
        if getattr(self, "_rollout", None) is not None:
            self._rollout.close()
            self._rollout = None
