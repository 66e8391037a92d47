"""``ManagerBasedRLEnv``: the env that runs the managers around the physics (Isaac Lab's shape).

``step(action)``:

1. ``action_manager.process_action`` / ``apply_action``, ``scene.write_data_to_sim`` (the control);
2. physics: ``decimation`` substeps with that control — one CUDA-graph launch on MuJoCo Warp;
3. ``scene.update``; episode counters; ``termination_manager.compute``; ``reward_manager.compute``;
4. the envs that are done are reset by index::

       reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)   # a sync, every step
       if len(reset_env_ids) > 0:
           self._reset_idx(reset_env_ids)

   ``_reset_idx`` applies the "reset" events and resets every manager, which log their episode
   statistics into ``extras["log"]`` (with ``.item()``: syncs on the steps that reset envs);
5. ``command_manager.compute`` (timers, resampling), ``event_manager.apply(mode="interval")``;
6. ``observation_manager.compute`` -> ``{"policy": ..., "critic": ...}``.

It returns ``(obs_dict, reward, terminated, truncated, extras)``; :mod:`manager_env.wrapper` adapts
that to rsl_rl's ``VecEnv``.
"""

from __future__ import annotations

import math

import torch

from manager_env.env_cfg import ManagerBasedRLEnvCfg
from manager_env.managers import (
    ActionManager,
    CommandManager,
    EventManager,
    ObservationManager,
    RewardManager,
    TerminationManager,
)
from manager_env.scene import InteractiveScene


class ManagerBasedRLEnv:
    def __init__(self, cfg: ManagerBasedRLEnvCfg):
        self.cfg = cfg
        self.scene = InteractiveScene(cfg.scene)
        self.physics_dt = self.scene.physics_dt
        self.decimation = self.scene.decimation
        self.step_dt = self.physics_dt * self.decimation
        self.max_episode_length_s = cfg.episode_length_s
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        n, dev = self.num_envs, self.device
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.common_step_counter = 0
        self.extras: dict = {}
        # managers, in Isaac Lab's load order (terms may read the managers loaded before them)
        self.command_manager = CommandManager(cfg.commands, self)
        self.action_manager = ActionManager(cfg.actions, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self)
        self.event_manager = EventManager(cfg.events, self)
        if "startup" in self.event_manager.available_modes:
            self.event_manager.apply(mode="startup")
        self.reset_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.reset_terminated = torch.zeros_like(self.reset_buf)
        self.reset_time_outs = torch.zeros_like(self.reset_buf)
        self.reward_buf = torch.zeros(n, device=dev)
        self.obs_buf: dict[str, torch.Tensor] = {}

    @property
    def num_envs(self) -> int:
        return self.scene.num_envs

    @property
    def device(self) -> torch.device:
        return self.scene.device

    @property
    def unwrapped(self) -> "ManagerBasedRLEnv":
        return self

    @property
    def backend(self) -> str:
        return self.scene.physics.backend

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None):
        if seed is not None:
            torch.manual_seed(seed)
        self._reset_idx(torch.arange(self.num_envs, device=self.device))
        self.scene.update(dt=0.0)
        self.obs_buf = self.observation_manager.compute()
        return self.obs_buf, self.extras

    def step(self, action: torch.Tensor):
        self.extras.pop("log", None)
        self.action_manager.process_action(action.to(self.device))
        self.action_manager.apply_action()
        self.scene.write_data_to_sim()
        self.scene.simulate()
        self.scene.update(dt=self.step_dt)

        self.episode_length_buf += 1
        self.common_step_counter += 1
        self.reset_buf = self.termination_manager.compute()
        self.reset_terminated = self.termination_manager.terminated
        self.reset_time_outs = self.termination_manager.time_outs
        self.reward_buf = self.reward_manager.compute(dt=self.step_dt)

        reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
        if len(reset_env_ids) > 0:
            self._reset_idx(reset_env_ids)
            self.scene.update(dt=0.0)

        self.command_manager.compute(dt=self.step_dt)
        if "interval" in self.event_manager.available_modes:
            self.event_manager.apply(mode="interval", dt=self.step_dt)
        self.obs_buf = self.observation_manager.compute()
        return self.obs_buf, self.reward_buf, self.reset_terminated, self.reset_time_outs, self.extras

    def close(self) -> None:
        close = getattr(self.scene.physics, "close", None)
        if close is not None:
            close()

    # ------------------------------------------------------------------ resets
    def _reset_idx(self, env_ids: torch.Tensor) -> None:
        self.scene.reset(env_ids)
        if "reset" in self.event_manager.available_modes:
            self.event_manager.apply(mode="reset", env_ids=env_ids)
        self.extras["log"] = {}
        for manager in (self.observation_manager, self.action_manager, self.reward_manager, self.command_manager,
                        self.event_manager, self.termination_manager):
            self.extras["log"].update(manager.reset(env_ids))
        self.episode_length_buf[env_ids] = 0
