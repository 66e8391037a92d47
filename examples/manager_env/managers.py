"""The managers of a manager-based RL env, in the shape of Isaac Lab's: each one owns a set of
configured *terms* (plain functions of the env in :mod:`manager_env.mdp`, with parameters) and runs
them every step — actions, observations, rewards, terminations, commands and events.

Term configs name their asset with :class:`SceneEntityCfg`; a config that names a subset of the
robot's joints (``joint_names=".*_hip"``) resolves to a *Python list* of joint indices once, at
manager construction, and the term indexes the data with it every step
(``data.joint_pos[:, asset_cfg.joint_ids]``) — as Isaac Lab's terms do. A list index is copied to
the device on every use: a blocking host-to-device copy.

The per-step host-device syncs made here (on purpose: they are what real manager envs do):

* ``CommandManager.compute`` -> ``CommandTerm.compute`` (``mdp.commands.UniformVelocityCommand``): which envs' command timers ran out
  (``nonzero``), which envs track a heading and which stand (``nonzero`` each);
* ``EventManager.apply(mode="interval")``: whether any env's interval timer ran out (``.any()``),
  then which (``nonzero``);
* on resets: ``RewardManager.reset`` logs each term's episode sum with ``.item()``,
  ``TerminationManager.reset`` each term's count, ``CommandManager.reset`` each command metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from manager_env import math_utils

# ---------------------------------------------------------------------------------------- configs


@dataclass
class SceneEntityCfg:
    """An asset of the scene, optionally restricted to some of its joints (regular expressions)."""

    name: str = "robot"
    joint_names: str | list[str] | None = None
    joint_ids: list[int] | slice = field(default_factory=lambda: slice(None))

    def resolve(self, scene) -> None:
        if self.joint_names is None:
            return
        asset = scene[self.name]
        ids, names = asset.find_joints(self.joint_names)
        # all joints, in order: a slice (no index copy); a subset: the list of indices
        self.joint_ids = slice(None) if names == asset.joint_names else ids


@dataclass
class ManagerTermCfg:
    func: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class UniformNoiseCfg:
    n_min: float = -1.0
    n_max: float = 1.0

    def __call__(self, data: torch.Tensor) -> torch.Tensor:
        return data + torch.rand_like(data) * (self.n_max - self.n_min) + self.n_min


@dataclass
class ObservationTermCfg(ManagerTermCfg):
    noise: UniformNoiseCfg | None = None
    clip: tuple[float, float] | None = None
    scale: float | None = None


@dataclass
class ObservationGroupCfg:
    terms: dict[str, ObservationTermCfg] = field(default_factory=dict)
    enable_corruption: bool = False  # apply the terms' noise
    concatenate_terms: bool = True


@dataclass
class RewardTermCfg(ManagerTermCfg):
    weight: float = 1.0


@dataclass
class TerminationTermCfg(ManagerTermCfg):
    time_out: bool = False  # a truncation (time limit), not a terminal state


@dataclass
class EventTermCfg(ManagerTermCfg):
    mode: str = "reset"  # "startup" | "reset" | "interval"
    interval_range_s: tuple[float, float] | None = None


@dataclass
class JointEffortActionCfg:
    asset_name: str = "robot"
    joint_names: str | list[str] = ".*"
    scale: float = 1.0
    offset: float = 0.0
    clip: tuple[float, float] | None = None


def _resolve_params(params: dict[str, Any], scene) -> None:
    for value in params.values():
        if isinstance(value, SceneEntityCfg):
            value.resolve(scene)


# ---------------------------------------------------------------------------------------- actions


class JointEffortAction:
    """Raw policy actions -> joint effort targets: ``clip(raw * scale + offset)``."""

    def __init__(self, cfg: JointEffortActionCfg, env):
        self.cfg = cfg
        self.asset = env.scene[cfg.asset_name]
        ids, _ = self.asset.find_joints(cfg.joint_names)
        self.joint_ids = slice(None) if len(ids) == self.asset.num_joints else ids
        self.action_dim = len(ids)
        self.raw_actions = torch.zeros(env.num_envs, self.action_dim, device=env.device)
        self.processed_actions = torch.zeros_like(self.raw_actions)

    def process_actions(self, actions: torch.Tensor) -> None:
        self.raw_actions[:] = actions
        self.processed_actions = self.raw_actions * self.cfg.scale + self.cfg.offset
        if self.cfg.clip is not None:
            self.processed_actions = torch.clamp(self.processed_actions, self.cfg.clip[0], self.cfg.clip[1])

    def apply_actions(self) -> None:
        self.asset.set_joint_effort_target(self.processed_actions, joint_ids=self.joint_ids)

    def reset(self, env_ids: torch.Tensor) -> None:
        self.raw_actions[env_ids] = 0.0


class ActionManager:
    def __init__(self, cfg: dict[str, JointEffortActionCfg], env):
        self._env = env
        self._terms = {name: JointEffortAction(term_cfg, env) for name, term_cfg in cfg.items()}
        self.total_action_dim = sum(t.action_dim for t in self._terms.values())
        self._action = torch.zeros(env.num_envs, self.total_action_dim, device=env.device)
        self._prev_action = torch.zeros_like(self._action)

    @property
    def action(self) -> torch.Tensor:
        return self._action

    @property
    def prev_action(self) -> torch.Tensor:
        return self._prev_action

    def process_action(self, action: torch.Tensor) -> None:
        if action.shape[1] != self.total_action_dim:
            raise ValueError(f"expected actions of width {self.total_action_dim}, got {tuple(action.shape)}")
        self._prev_action[:] = self._action
        self._action[:] = action.to(self._env.device)
        idx = 0
        for term in self._terms.values():
            term.process_actions(action[:, idx : idx + term.action_dim])
            idx += term.action_dim

    def apply_action(self) -> None:
        for term in self._terms.values():
            term.apply_actions()

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        self._prev_action[env_ids] = 0.0
        self._action[env_ids] = 0.0
        for term in self._terms.values():
            term.reset(env_ids)
        return {}


# ---------------------------------------------------------------------------------------- observations


class ObservationManager:
    """Groups of observation terms; each term's output is cloned, corrupted with noise (where the
    group enables it), clipped and scaled, and the group's terms are concatenated."""

    def __init__(self, cfg: dict[str, ObservationGroupCfg], env):
        self._env = env
        self._groups = cfg
        for group in cfg.values():
            for term_cfg in group.terms.values():
                _resolve_params(term_cfg.params, env.scene)

    def compute(self) -> dict[str, torch.Tensor]:
        return {name: self.compute_group(name) for name in self._groups}

    def compute_group(self, group_name: str) -> torch.Tensor:
        group = self._groups[group_name]
        terms = []
        for term_cfg in group.terms.values():
            obs = term_cfg.func(self._env, **term_cfg.params).clone()
            if group.enable_corruption and term_cfg.noise is not None:
                obs = term_cfg.noise(obs)
            if term_cfg.clip is not None:
                obs = obs.clip_(min=term_cfg.clip[0], max=term_cfg.clip[1])
            if term_cfg.scale is not None:
                obs = obs.mul_(term_cfg.scale)
            terms.append(obs)
        return torch.cat(terms, dim=-1)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        return {}


# ---------------------------------------------------------------------------------------- rewards


class RewardManager:
    """The step reward: the weighted sum of the terms, times the step length; per-term episode sums
    are kept and logged (as episode means per second) when envs reset."""

    def __init__(self, cfg: dict[str, RewardTermCfg], env):
        self._env = env
        self._term_names = list(cfg)
        self._term_cfgs = list(cfg.values())
        for term_cfg in self._term_cfgs:
            _resolve_params(term_cfg.params, env.scene)
        n, dev = env.num_envs, env.device
        self._episode_sums = {name: torch.zeros(n, device=dev) for name in self._term_names}
        self._reward_buf = torch.zeros(n, device=dev)
        self._step_reward = torch.zeros(n, len(self._term_names), device=dev)

    @property
    def active_terms(self) -> list[str]:
        return list(self._term_names)

    def compute(self, dt: float) -> torch.Tensor:
        self._reward_buf[:] = 0.0
        for term_idx, (name, term_cfg) in enumerate(zip(self._term_names, self._term_cfgs)):
            if term_cfg.weight == 0.0:
                continue
            value = term_cfg.func(self._env, **term_cfg.params) * term_cfg.weight * dt
            value = torch.nan_to_num(value, nan=0.0, posinf=0.0, neginf=0.0)  # a diverged world earns nothing
            self._reward_buf += value
            self._episode_sums[name] += value
            self._step_reward[:, term_idx] = value / dt
        return self._reward_buf

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        extras = {}
        for name, sums in self._episode_sums.items():
            episodic_sum_avg = torch.mean(sums[env_ids])
            extras["Episode_Reward/" + name] = (episodic_sum_avg / self._env.max_episode_length_s).item()
            sums[env_ids] = 0.0
        return extras


# ---------------------------------------------------------------------------------------- terminations


class TerminationManager:
    def __init__(self, cfg: dict[str, TerminationTermCfg], env):
        self._env = env
        self._term_names = list(cfg)
        self._term_cfgs = list(cfg.values())
        for term_cfg in self._term_cfgs:
            _resolve_params(term_cfg.params, env.scene)
        n, dev = env.num_envs, env.device
        self._term_dones = torch.zeros(n, len(self._term_names), dtype=torch.bool, device=dev)
        self._truncated_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self._terminated_buf = torch.zeros_like(self._truncated_buf)

    @property
    def dones(self) -> torch.Tensor:
        return self._truncated_buf | self._terminated_buf

    @property
    def time_outs(self) -> torch.Tensor:
        return self._truncated_buf

    @property
    def terminated(self) -> torch.Tensor:
        return self._terminated_buf

    def compute(self) -> torch.Tensor:
        self._truncated_buf[:] = False
        self._terminated_buf[:] = False
        for i, term_cfg in enumerate(self._term_cfgs):
            value = term_cfg.func(self._env, **term_cfg.params)
            if term_cfg.time_out:
                self._truncated_buf |= value
            else:
                self._terminated_buf |= value
            self._term_dones[:, i] = value
        return self._truncated_buf | self._terminated_buf

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        extras = {}
        for i, name in enumerate(self._term_names):
            extras["Episode_Termination/" + name] = torch.count_nonzero(self._term_dones[env_ids, i]).item()
        return extras


# ---------------------------------------------------------------------------------------- commands


class CommandTerm:
    """Base of command terms: a command per env, resampled on a timer, with metrics logged on reset."""

    def __init__(self, cfg, env):
        self.cfg = cfg
        self._env = env
        self.device = env.device
        n = env.num_envs
        self.time_left = torch.zeros(n, device=self.device)
        self.command_counter = torch.zeros(n, dtype=torch.long, device=self.device)
        self.metrics: dict[str, torch.Tensor] = {}

    @property
    def command(self) -> torch.Tensor:
        raise NotImplementedError

    def compute(self, dt: float) -> None:
        self._update_metrics()
        self.time_left -= dt
        resample_env_ids = (self.time_left <= 0.0).nonzero().flatten()
        if len(resample_env_ids) > 0:
            self._resample(resample_env_ids)
        self._update_command()

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        extras = {}
        for metric_name, metric_value in self.metrics.items():
            extras[metric_name] = torch.mean(metric_value[env_ids]).item()
            metric_value[env_ids] = 0.0
        self.command_counter[env_ids] = 0
        self._resample(env_ids)
        return extras

    def _resample(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) != 0:
            self.time_left[env_ids] = self.time_left[env_ids].uniform_(*self.cfg.resampling_time_range)
            self._resample_command(env_ids)
            self.command_counter[env_ids] += 1

    def _resample_command(self, env_ids: torch.Tensor) -> None:
        raise NotImplementedError

    def _update_command(self) -> None:
        raise NotImplementedError

    def _update_metrics(self) -> None:
        raise NotImplementedError


class CommandManager:
    def __init__(self, cfg: dict[str, Any], env):
        self._terms = {name: term_cfg.class_type(term_cfg, env) for name, term_cfg in cfg.items()}

    def get_command(self, name: str) -> torch.Tensor:
        return self._terms[name].command

    def compute(self, dt: float) -> None:
        for term in self._terms.values():
            term.compute(dt)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        extras = {}
        for name, term in self._terms.items():
            for metric_name, value in term.reset(env_ids).items():
                extras[f"Metrics/{name}/{metric_name}"] = value
        return extras


# ---------------------------------------------------------------------------------------- events


class EventManager:
    """Terms applied at ``startup`` (once), on ``reset`` (to the envs being reset) and at ``interval``
    (each env on its own timer, redrawn from ``interval_range_s`` when it fires)."""

    def __init__(self, cfg: dict[str, EventTermCfg], env):
        self._env = env
        self._mode_terms: dict[str, list[tuple[str, EventTermCfg]]] = {}
        for name, term_cfg in cfg.items():
            if term_cfg.mode not in ("startup", "reset", "interval"):
                raise ValueError(f"event {name!r}: unknown mode {term_cfg.mode!r}")
            if term_cfg.mode == "interval" and term_cfg.interval_range_s is None:
                raise ValueError(f"event {name!r}: an interval event needs interval_range_s")
            _resolve_params(term_cfg.params, env.scene)
            self._mode_terms.setdefault(term_cfg.mode, []).append((name, term_cfg))
        self._interval_time_left = []
        for _, term_cfg in self._mode_terms.get("interval", []):
            lower, upper = term_cfg.interval_range_s
            self._interval_time_left.append(math_utils.sample_uniform(lower, upper, env.num_envs, env.device))

    @property
    def available_modes(self) -> list[str]:
        return list(self._mode_terms)

    def apply(self, mode: str, env_ids: torch.Tensor | None = None, dt: float | None = None) -> None:
        for index, (_, term_cfg) in enumerate(self._mode_terms.get(mode, [])):
            if mode == "interval":
                time_left = self._interval_time_left[index]
                time_left -= dt
                due = time_left <= 1e-6
                if due.any():
                    due_env_ids = due.nonzero().flatten()
                    lower, upper = term_cfg.interval_range_s
                    time_left[due_env_ids] = math_utils.sample_uniform(lower, upper, len(due_env_ids), self._env.device)
                    term_cfg.func(self._env, due_env_ids, **term_cfg.params)
            else:
                ids = env_ids if env_ids is not None else torch.arange(self._env.num_envs, device=self._env.device)
                term_cfg.func(self._env, ids, **term_cfg.params)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        return {}
