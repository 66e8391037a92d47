"""Batched locomotion task shared by every backend: observations, reward, termination, resets.

A backend (``mjwarp.py`` on MuJoCo Warp, ``mujoco_cpu.py`` on MuJoCo C) only owns the physics: it
exposes the state as torch views (``qpos`` ``[N, nq]``, ``qvel`` ``[N, nv]``) and the control as
``actions`` (or copies ``actions`` into its own control buffer), and implements ``_simulate`` (one
control step = ``decimation`` physics substeps). Everything else happens here, on device, on
buffers allocated once in ``__init__``:

* every op in ``step`` writes into a preallocated tensor (``out=``, in-place, ``copy_``), so a step
  makes no allocation and no host-device sync;
* partial resets use a boolean mask (``torch.where(mask, init, state, out=state)``,
  ``masked_fill_``) — never ``nonzero()`` or boolean indexing, whose output shape depends on data;
* a world whose state went NaN or whose velocity exploded counts as terminated and is reset through
  the same mask, so one bad world never poisons the batch.

The tensors returned by ``step``/``reset`` (``obs``, ``reward``, ``done`` and the ``info`` entries)
are the env's own buffers: they are overwritten by the next call. Copy what you keep.

Observation: ``qpos[2:]`` (root height, orientation, joint angles; the root's x/y are left out so
the policy is translation invariant) then ``qvel``. Reward: ``forward_weight * vx +
healthy_reward * healthy - ctrl_cost * sum(action**2)``, with ``vx`` the root's world-frame
x velocity after the step. Termination: root height outside ``healthy_z`` or divergence;
truncation at ``max_episode_steps``.
"""

from __future__ import annotations

import math

import torch

from perfkit.envs.models import ModelSpec, get_spec, load_mjmodel

# Free-joint root: qpos[0:3] position, qpos[3:7] quaternion. Joint angles start at 7.
_ROOT_QPOS = 7


def check_num_envs(num_envs) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int):
        raise TypeError(f"num_envs must be an int >= 1, got {type(num_envs).__name__} {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return num_envs


def resolve_device(device) -> torch.device:
    """``torch.device`` with an explicit index for CUDA (so it compares equal to tensors' devices)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available on this machine")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type != "cpu":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return dev


class LocomotionEnv:
    """Base of the batched reference env; subclasses provide the physics (see module docstring)."""

    backend = ""

    def __init__(self, name: str, num_envs: int, device, seed: int = 0):
        self.spec: ModelSpec = get_spec(name)
        self.name = name
        self.num_envs = check_num_envs(num_envs)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed = seed
        self.device = resolve_device(device)
        mjm = load_mjmodel(name)
        self.nq, self.nv, self.act_dim = int(mjm.nq), int(mjm.nv), int(mjm.nu)
        self.obs_dim = self.nq - 2 + self.nv
        self.sim_dt = float(mjm.opt.timestep)
        self.decimation = self.spec.decimation
        self.policy_dt = self.sim_dt * self.decimation
        self.max_episode_steps = self.spec.max_episode_steps
        self._act_shape = torch.Size((self.num_envs, self.act_dim))
        self._ctrl_range = (-1.0, 1.0)  # both models: ctrlrange="-1 1" on every actuator

        # --- physics state (backend): sets self.qpos, self.qvel and (optionally) self.actions
        self.actions = None
        self._init_physics(mjm)
        n, dev = self.num_envs, self.device
        sdt = self.qpos.dtype
        if self.actions is None:
            self.actions = torch.zeros(self._act_shape, dtype=torch.float32, device=dev)

        # --- generator for reset noise (on the env's device: no host round trip)
        self._gen = torch.Generator(device=dev)
        self._gen.manual_seed(seed)

        # --- outputs
        self.obs = torch.zeros((n, self.obs_dim), dtype=torch.float32, device=dev)
        self.reward = torch.zeros(n, dtype=torch.float32, device=dev)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.done = torch.zeros(n, dtype=torch.bool, device=dev)
        self.episode_length = torch.zeros(n, dtype=torch.int32, device=dev)
        self.episode_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self.final_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self.final_length = torch.zeros(n, dtype=torch.int32, device=dev)
        self.info = {
            "terminated": self.terminated,
            "truncated": self.truncated,
            "final_return": self.final_return,  # return of the episode that ended (valid where done)
            "final_length": self.final_length,
            "episode_length": self.episode_length,
        }

        # --- scratch, and views made once (slicing in step would still be cheap, but views made
        #     here are obviously free of allocation and keep step() to arithmetic only)
        self._healthy = torch.zeros(n, dtype=torch.bool, device=dev)
        self._tmp_bool = torch.zeros(n, dtype=torch.bool, device=dev)
        self._ctrl_sq = torch.zeros(n, dtype=torch.float32, device=dev)
        self._act_sq = torch.zeros_like(self.actions)
        self._vel_norm = torch.zeros(n, dtype=sdt, device=dev)
        self._done_col = self.done.unsqueeze(1)
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        self._reset_mask_col = self._reset_mask.unsqueeze(1)
        self._obs_q = self.obs[:, : self.nq - 2]
        self._obs_v = self.obs[:, self.nq - 2 :]
        self._qpos_tail = self.qpos[:, 2:]
        self._root_z = self.qpos[:, 2]
        self._root_vx = self.qvel[:, 0]

        # --- reset targets: qpos0 plus uniform noise on joint angles and on all velocities, redrawn
        #     every step for all worlds (cheaper than a data-dependent gather of the reset ones).
        #     One row holds [qpos | qvel]; the noisy part [joint angles | qvel] is one slice, so a
        #     single uniform_ draws it; the root pose (first 7) keeps qpos0.
        qpos0 = torch.as_tensor(mjm.qpos0, dtype=sdt).to(dev)
        self._qpos0_joints = qpos0[_ROOT_QPOS:].clone()
        self._init_state = torch.zeros((n, self.nq + self.nv), dtype=sdt, device=dev)
        self._init_state[:, : self.nq] = qpos0
        self._qpos_init = self._init_state[:, : self.nq]
        self._qvel_init = self._init_state[:, self.nq :]
        self._init_noisy = self._init_state[:, _ROOT_QPOS:]
        self._qpos_init_joints = self._init_state[:, _ROOT_QPOS : self.nq]
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._all_col = self._all.unsqueeze(1)

        self._after_init()

    # ------------------------------------------------------------------ backend interface
    def _init_physics(self, mjm) -> None:
        raise NotImplementedError

    def _after_init(self) -> None:
        """Hook run once all buffers exist (the mjwarp backend captures its CUDA graph here)."""

    def _write_ctrl(self) -> None:
        """Copy ``self.actions`` into the physics control buffer (no-op when they are the same)."""

    def _simulate(self) -> None:
        """One control step of physics (``decimation`` substeps)."""
        raise NotImplementedError

    def _reset_physics_extras(self, mask_col: torch.Tensor) -> None:
        """Clear backend state beyond qpos/qvel (e.g. solver warm start) where ``mask_col``."""

    # ------------------------------------------------------------------ public API
    def close(self) -> None:
        """Release what the physics backend holds beyond memory (MuJoCo's rollout threads); nothing here."""

    def reset(self) -> torch.Tensor:
        """Reset every world; returns the observation buffer ``[num_envs, obs_dim]``."""
        with torch.no_grad():
            self.done.zero_()
            self.terminated.zero_()
            self.truncated.zero_()
            self.final_return.zero_()
            self.final_length.zero_()
            self.reset_where(self._all)
        return self.obs

    def reset_where(self, mask: torch.Tensor) -> torch.Tensor:
        """Reset the worlds where the boolean ``mask`` ``[num_envs]`` is True (fresh initial state,
        episode counters cleared); the others are left exactly as they are. Returns the
        (refreshed) observation buffer."""
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(f"mask must be a torch.bool tensor of shape ({self.num_envs},)")
        if mask.shape != (self.num_envs,) or mask.device != self.device:
            raise ValueError(
                f"mask must have shape ({self.num_envs},) on {self.device}, got {tuple(mask.shape)} on {mask.device}"
            )
        with torch.no_grad():
            self._reset_mask.copy_(mask)
            self.episode_length.masked_fill_(self._reset_mask, 0)
            self.episode_return.masked_fill_(self._reset_mask, 0.0)
            self._draw_reset_targets()
            self._reset_masked(self._reset_mask_col)
            self.compute_observations()
        return self.obs

    def step(self, actions: torch.Tensor):
        """Advance every world one control step (``decimation`` physics substeps).

        ``actions``: float32 ``[num_envs, act_dim]`` on the env's device, clipped to [-1, 1].
        Returns ``obs, reward, done, info`` (the env's buffers; see the module docstring). Worlds
        that are done are reset before returning, so ``obs`` is already the next episode's first
        observation there.
        """
        self._check_actions(actions)
        with torch.no_grad():
            torch.clamp(actions, self._ctrl_range[0], self._ctrl_range[1], out=self.actions)
            self._write_ctrl()
            self._draw_reset_targets()  # before the physics: the task step below reads them
            self._advance()
        return self.obs, self.reward, self.done, self.info

    def _advance(self) -> None:
        """Physics, then the task's step: terminations, reward, episode counters, reset of the
        worlds that are done, observations (the MuJoCo Warp backend runs the task part as one
        Warp kernel in its CUDA graph: :mod:`perfkit.envs.task_kernel`)."""
        self._simulate()
        self.task_step()

    def task_step(self) -> None:
        """The task's work after the physics, in torch ops: the definition of the task."""
        self.compute_terminations()
        self.compute_reward()
        self._update_episodes()
        self._reset_masked(self._done_col)
        self.compute_observations()

    # ------------------------------------------------------------------ shared task code
    def compute_terminations(self) -> None:
        zmin, zmax = self.spec.healthy_z
        torch.ge(self._root_z, zmin, out=self._healthy)
        torch.le(self._root_z, zmax, out=self._tmp_bool)
        self._healthy.logical_and_(self._tmp_bool)
        # NaN anywhere in qvel makes the inf-norm NaN, and NaN < max is False: diverged -> unhealthy.
        torch.linalg.vector_norm(self.qvel, ord=math.inf, dim=1, out=self._vel_norm)
        torch.lt(self._vel_norm, self.spec.max_qvel, out=self._tmp_bool)
        self._healthy.logical_and_(self._tmp_bool)
        torch.logical_not(self._healthy, out=self.terminated)

    def compute_reward(self) -> None:
        spec = self.spec
        # not torch.linalg.vecdot(..., out=): on CUDA it allocates the product as a temporary
        torch.mul(self.actions, self.actions, out=self._act_sq)
        torch.sum(self._act_sq, dim=1, out=self._ctrl_sq)
        torch.mul(self._root_vx, spec.forward_weight, out=self.reward)
        self.reward.add_(self._ctrl_sq, alpha=-spec.ctrl_cost)
        self.reward.add_(self._healthy, alpha=spec.healthy_reward)
        self.reward.nan_to_num_(0.0, 0.0, 0.0)  # a diverged world earns nothing, and poisons nothing

    def _update_episodes(self) -> None:
        self.episode_length.add_(1)
        torch.ge(self.episode_length, self.max_episode_steps, out=self.truncated)
        torch.logical_or(self.terminated, self.truncated, out=self.done)
        self.episode_return.add_(self.reward)
        torch.where(self.done, self.episode_return, self.final_return, out=self.final_return)
        torch.where(self.done, self.episode_length, self.final_length, out=self.final_length)
        self.episode_return.masked_fill_(self.done, 0.0)
        self.episode_length.masked_fill_(self.done, 0)

    def _draw_reset_targets(self) -> None:
        noise = self.spec.reset_noise
        self._init_noisy.uniform_(-noise, noise, generator=self._gen)
        self._qpos_init_joints.add_(self._qpos0_joints)

    def _reset_masked(self, mask_col: torch.Tensor) -> None:
        torch.where(mask_col, self._qpos_init, self.qpos, out=self.qpos)
        torch.where(mask_col, self._qvel_init, self.qvel, out=self.qvel)
        self._reset_physics_extras(mask_col)

    def compute_observations(self) -> None:
        self._obs_q.copy_(self._qpos_tail)
        self._obs_v.copy_(self.qvel)

    # ------------------------------------------------------------------ helpers (not hot)
    def _check_actions(self, actions) -> None:
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
        if actions.shape != self._act_shape:
            raise ValueError(
                f"actions must have shape (num_envs, act_dim) = {tuple(self._act_shape)}, got {tuple(actions.shape)}"
            )
        if actions.dtype != torch.float32:
            raise TypeError(f"actions must be torch.float32, got {actions.dtype}")
        if actions.device != self.device:
            raise ValueError(f"actions must be on the env's device {self.device}, got {actions.device}")

    def get_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of ``(qpos, qvel)`` (float64, on the env's device)."""
        return self.qpos.to(torch.float64, copy=True), self.qvel.to(torch.float64, copy=True)

    def set_state(self, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
        """Overwrite every world's ``qpos`` ``[N, nq]`` and ``qvel`` ``[N, nv]``; resets episode
        counters and solver warm start. Returns the refreshed observation buffer."""
        if tuple(qpos.shape) != (self.num_envs, self.nq) or tuple(qvel.shape) != (self.num_envs, self.nv):
            raise ValueError(
                f"set_state expects qpos {(self.num_envs, self.nq)} and qvel {(self.num_envs, self.nv)}, "
                f"got {tuple(qpos.shape)} and {tuple(qvel.shape)}"
            )
        with torch.no_grad():
            self.qpos.copy_(qpos)
            self.qvel.copy_(qvel)
            self._reset_physics_extras(self._all_col)
            self.episode_length.zero_()
            self.episode_return.zero_()
            self.done.zero_()
            self.compute_observations()
        return self.obs

    def describe(self) -> dict:
        """The env block reports print (plain data): :func:`perfkit.batched_env.describe_env`."""
        from perfkit.batched_env import describe_env

        return describe_env(self)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, num_envs={self.num_envs}, backend={self.backend!r}, "
            f"device={str(self.device)!r}, obs_dim={self.obs_dim}, act_dim={self.act_dim}, "
            f"sim_dt={self.sim_dt}, decimation={self.decimation})"
        )
