"""A small PPO for batched envs: everything on the env's device, no host sync inside an iteration.

Usage (``examples/train.py``)::

    ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, device=env.device, seed=0)
    obs = env.reset()
    for it in range(iterations):
        with torch.inference_mode():
            for _ in range(ppo.cfg.num_steps):
                actions = ppo.act(obs)
                obs, reward, done, info = env.step(actions)
                ppo.process_env_step(reward, done, info)
        ppo.update(obs)
        for metrics in ppo.log_iteration_async():  # no wait: the iterations whose metrics have landed
            print(metrics)
    for metrics in ppo.drain_metrics():  # after training: wait for the last ones (teardown)
        print(metrics)

Episode statistics and losses are accumulated in device tensors. ``log_iteration`` reads them all
with one blocking transfer and clears them; ``log_iteration_async`` enqueues the same transfer into
pinned host memory (non-blocking) and returns the iterations whose copies have already landed, timed
with CUDA events, so the training loop never waits for the GPU.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import torch

from perfkit.rl.networks import ActorCritic, ObsNormalizer
from perfkit.rl.storage import RolloutStorage

METRICS = ("reward_per_step", "episode_return", "episode_length", "episodes", "policy_loss", "value_loss", "entropy", "action_std")
# log_iteration() also reports "sps": env steps per second over the iteration (rollout + update),
# timed between two of its host reads, so the clock is read only after the device caught up.


@dataclass
class PPOConfig:
    num_steps: int = 32  # rollout length per env per iteration
    epochs: int = 4
    minibatches: int = 4
    lr: float = 3e-3
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_coef: float = 1.0
    entropy_coef: float = 0.0
    max_grad_norm: float = 1.0
    hidden: tuple[int, ...] = (64, 64)
    init_std: float = 0.6

    def __post_init__(self):
        for name in ("num_steps", "epochs", "minibatches"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"PPOConfig.{name} must be an int >= 1, got {v!r}")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"PPOConfig needs 0 < gamma <= 1 and 0 <= lam <= 1, got {self.gamma}, {self.lam}")


class PPO:
    def __init__(self, obs_dim: int, act_dim: int, num_envs: int, device="cpu", cfg: PPOConfig | None = None, seed: int = 0):
        self.cfg = cfg or PPOConfig()
        self.device = torch.device(device)
        self.num_envs = num_envs
        batch = self.cfg.num_steps * num_envs
        if batch < self.cfg.minibatches:
            raise ValueError(f"num_steps * num_envs = {batch} is smaller than minibatches = {self.cfg.minibatches}")
        torch.manual_seed(seed)  # network initialisation
        self.policy = ActorCritic(obs_dim, act_dim, self.cfg.hidden, self.cfg.init_std).to(self.device)
        self.normalizer = ObsNormalizer(obs_dim).to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=self.cfg.lr)
        self.storage = RolloutStorage(self.cfg.num_steps, num_envs, obs_dim, act_dim, self.device)
        self._gen = torch.Generator(device=self.device)
        self._gen.manual_seed(seed)
        self._t = 0
        self._batch = batch
        self._mb_size = batch // self.cfg.minibatches
        # preallocated per-step scratch
        self._noise = torch.zeros((num_envs, act_dim), device=self.device)
        self._noise_sq = torch.zeros((num_envs, act_dim), device=self.device)
        self._norm_obs = torch.zeros((num_envs, obs_dim), device=self.device)
        self._std = torch.zeros(act_dim, device=self.device)
        self._log_norm = torch.zeros((), device=self.device)  # sum(log_std) + act_dim * log(sqrt(2 pi))
        self._perm = torch.zeros(batch, dtype=torch.int64, device=self.device)
        # on-device accumulators, read once per iteration by log_iteration()
        self._reward_sum = torch.zeros(num_envs, device=self.device)
        self._ep_return_sum = torch.zeros(num_envs, device=self.device)
        self._ep_length_sum = torch.zeros(num_envs, device=self.device)
        self._ep_count = torch.zeros(num_envs, device=self.device)
        self._loss_sums = torch.zeros(3, device=self.device)  # policy, value, entropy
        self._metrics = torch.zeros(len(METRICS), device=self.device)
        self._last_episode = (0.0, 0.0)
        self._refresh_policy_constants()
        self._iter_start = time.perf_counter()  # last known mean return/length, for iterations with no episode end
        # called after each minibatch's backward, before clipping and the optimizer step: data-parallel
        # training averages the gradients over the ranks here (examples/train_ddp.py)
        self.grad_sync: Callable[[], None] | None = None
        self._iterations_logged = 0
        self._init_async_metrics()
        self._flat = {
            "obs": self.storage.obs.view(batch, obs_dim),
            "actions": self.storage.actions.view(batch, act_dim),
            "log_probs": self.storage.log_probs.view(batch),
            "values": self.storage.values.view(batch),
            "advantages": self.storage.advantages.view(batch),
            "returns": self.storage.returns.view(batch),
        }

    # ------------------------------------------------------------------ rollout
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for ``obs`` ``[num_envs, obs_dim]`` and record obs/action/value/log-prob in
        row ``t`` of the storage. Call under ``torch.inference_mode()``. The returned tensor is the
        storage row (valid until the next iteration)."""
        s, t = self.storage, self._t
        s.obs[t].copy_(obs)
        mean, value = self.policy(self.normalizer.normalize_into(obs, self._norm_obs))
        s.values[t].copy_(value)
        self._noise.normal_(generator=self._gen)
        actions = s.actions[t]
        torch.addcmul(mean, self._noise, self._std, out=actions)
        # log N(a; mean, std) with (a - mean) / std = noise
        torch.mul(self._noise, self._noise, out=self._noise_sq)
        log_prob = s.log_probs[t]
        torch.sum(self._noise_sq, dim=1, out=log_prob)
        log_prob.mul_(-0.5).sub_(self._log_norm)
        return actions

    def _refresh_policy_constants(self) -> None:
        """std and the Gaussian's log-normaliser change only in update(): compute them there."""
        with torch.no_grad():
            torch.exp(self.policy.log_std, out=self._std)
            torch.sum(self.policy.log_std, dim=0, out=self._log_norm)
            self._log_norm.add_(0.9189385332046727 * self._std.numel())

    def process_env_step(self, reward: torch.Tensor, done: torch.Tensor, info: dict) -> None:
        """Record the transition's reward/done in row ``t`` and accumulate episode statistics."""
        s, t, gamma = self.storage, self._t, self.cfg.gamma
        rewards = s.rewards[t]
        rewards.copy_(reward)
        # time-limit truncation is not failure: bootstrap with the value of the last state seen
        rewards.addcmul_(info["truncated"], s.values[t], value=gamma)
        not_done = s.not_dones[t]
        torch.logical_not(done, out=not_done)
        self._reward_sum.add_(reward)
        self._ep_count.add_(done)
        self._ep_return_sum.addcmul_(info["final_return"], done)
        self._ep_length_sum.addcmul_(info["final_length"], done)
        self._t += 1

    # ------------------------------------------------------------------ learning
    def update(self, last_obs: torch.Tensor) -> None:
        """GAE on the finished rollout, then ``epochs`` x ``minibatches`` clipped-PPO steps."""
        if self._t != self.cfg.num_steps:
            raise RuntimeError(f"update() after {self._t} steps; the rollout holds {self.cfg.num_steps}")
        cfg, f = self.cfg, self._flat
        with torch.no_grad():
            _, last_values = self.policy(self.normalizer(last_obs))
            self.storage.compute_returns(last_values, cfg.gamma, cfg.lam)
            adv_std, adv_mean = torch.std_mean(f["advantages"])
            f["advantages"].sub_(adv_mean).div_(adv_std + 1e-8)
            norm_obs = self.normalizer(f["obs"])
        for _ in range(cfg.epochs):
            torch.randperm(self._batch, generator=self._gen, device=self.device, out=self._perm)
            for k in range(cfg.minibatches):
                idx = self._perm[k * self._mb_size : (k + 1) * self._mb_size]
                self._minibatch_step(norm_obs[idx], f["actions"][idx], f["log_probs"][idx], f["advantages"][idx], f["returns"][idx])
        with torch.no_grad():
            self.normalizer.update(f["obs"])
        self._refresh_policy_constants()
        self._t = 0

    def _minibatch_step(self, obs, actions, old_log_probs, advantages, returns) -> None:
        cfg = self.cfg
        mean, values = self.policy(obs)
        log_probs = self.policy.log_prob(mean, actions)
        ratio = torch.exp(log_probs - old_log_probs)
        surrogate = torch.min(ratio * advantages, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * advantages)
        policy_loss = -surrogate.mean()
        value_loss = (returns - values).pow(2).mean()
        entropy = self.policy.entropy()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_sync is not None:
            self.grad_sync()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        with torch.no_grad():
            self._loss_sums[0].add_(policy_loss)
            self._loss_sums[1].add_(value_loss)
            self._loss_sums[2].add_(entropy)

    # ------------------------------------------------------------------ logging (once per iteration)
    def log_iteration(self) -> dict[str, float]:
        """Mean metrics of the last iteration, read from the device in one transfer, then cleared.

        ``episode_return``/``episode_length`` average the episodes that ended during the
        iteration (the last known value when none did); ``episodes`` counts them. The read waits for
        the device (a sync per iteration); :meth:`log_iteration_async` does not."""
        self._reduce_metrics()
        values = self._metrics.tolist()  # the iteration's single device->host read; it waits for the device
        return self._metrics_dict(values, self._host_sps())

    def log_iteration_async(self) -> list[dict[str, float]]:
        """Like :meth:`log_iteration`, without waiting: this iteration's metrics go to pinned host
        memory by a non-blocking copy; returned are the iterations (oldest first) whose copies have
        landed, each timed by CUDA events at the iteration boundaries. On the CPU the copy is
        immediate and this iteration is returned."""
        self._reduce_metrics()
        if not self._async:
            return [self._metrics_dict(self._metrics_np.tolist(), self._host_sps())]  # numpy view: a host read
        landed = []
        if len(self._pending) == len(self._host):
            landed = self._collect(wait_oldest=True)  # every buffer in flight (the GPU is far behind): wait
        slot = self._iterations_enqueued % len(self._host)
        event = self._events[self._iterations_enqueued % len(self._events)]
        self._host[slot].copy_(self._metrics, non_blocking=True)
        event.record()
        self._pending.append((slot, event, self._prev_event))
        self._prev_event = event
        self._iterations_enqueued += 1
        return landed + self._collect()

    def drain_metrics(self) -> list[dict[str, float]]:
        """The metrics still in flight from :meth:`log_iteration_async`, waiting for them (call it once,
        after training)."""
        out: list[dict[str, float]] = []
        while self._async and self._pending:
            out += self._collect(wait_oldest=True)
        return out

    # ---- metrics helpers ---------------------------------------------------------------------------
    def _init_async_metrics(self, in_flight: int = 4) -> None:
        self._async = self.device.type == "cuda"
        if not self._async:
            self._metrics_np = self._metrics.numpy()  # a view: reading it is a host read, no transfer
            return
        self._host = [torch.zeros(len(METRICS), pin_memory=True) for _ in range(in_flight)]
        self._host_np = [h.numpy() for h in self._host]
        # in flight + the last collected one (the start of the oldest pending span) + one to record
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(in_flight + 2)]
        self._prev_event = torch.cuda.Event(enable_timing=True)
        self._prev_event.record()
        self._pending: deque = deque()
        self._iterations_enqueued = 0

    def _collect(self, wait_oldest: bool = False) -> list[dict[str, float]]:
        out = []
        while self._pending:
            slot, event, start = self._pending[0]
            if wait_oldest and not out:
                event.synchronize()  # perfkit: ignore[PK110] back-pressure: only with every pinned buffer in flight
            elif not event.query():
                break
            self._pending.popleft()
            seconds = max(start.elapsed_time(event) / 1e3, 1e-9)
            out.append(self._metrics_dict(self._host_np[slot].tolist(), self.num_envs * self.cfg.num_steps / seconds))
        return out

    def _reduce_metrics(self) -> None:
        """This iteration's means into ``self._metrics`` (on the device), accumulators cleared."""
        m, n_updates = self._metrics, self.cfg.epochs * self.cfg.minibatches
        with torch.no_grad():
            episodes = self._ep_count.sum()
            m[0] = self._reward_sum.sum() / (self.num_envs * self.cfg.num_steps)
            m[1] = self._ep_return_sum.sum() / episodes.clamp(min=1)
            m[2] = self._ep_length_sum.sum() / episodes.clamp(min=1)
            m[3] = episodes
            m[4:7] = self._loss_sums / n_updates
            m[7] = torch.exp(self.policy.log_std).mean()
            for acc in (self._reward_sum, self._ep_return_sum, self._ep_length_sum, self._ep_count, self._loss_sums):
                acc.zero_()

    def _host_sps(self) -> float:
        now = time.perf_counter()
        sps = self.num_envs * self.cfg.num_steps / max(now - self._iter_start, 1e-9)
        self._iter_start = now
        return sps

    def _metrics_dict(self, values: list[float], sps: float) -> dict[str, float]:
        out = dict(zip(METRICS, values))
        out["sps"] = sps
        out["iteration"] = self._iterations_logged
        self._iterations_logged += 1
        if out["episodes"] > 0:
            self._last_episode = (out["episode_return"], out["episode_length"])
        else:
            out["episode_return"], out["episode_length"] = self._last_episode
        return out
