"""An on-policy runner: rollout collection, PPO update, logging, and wall-clock throughput."""

import time
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class ActorCritic(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs_dim, 256), nn.ELU(), nn.Linear(256, act_dim))
        self.critic = nn.Sequential(nn.Linear(obs_dim, 256), nn.ELU(), nn.Linear(256, 1))
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: torch.Tensor):
        mu = self.actor(obs)
        return mu, self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor):
        mu, value = self(obs)
        std = self.log_std.exp().expand_as(mu)
        dist = torch.distributions.Normal(mu, std)
        action = dist.sample()
        if torch.isnan(action).any():  # expect: PK103
            raise RuntimeError("nan action")
        return action, dist.log_prob(action).sum(-1), value


class RolloutStorage:
    def __init__(self, num_envs: int, horizon: int, obs_dim: int, act_dim: int, device="cuda"):
        self.obs = torch.zeros(horizon, num_envs, obs_dim, device=device)
        self.actions = torch.zeros(horizon, num_envs, act_dim, device=device)
        self.rewards = torch.zeros(horizon, num_envs, device=device)
        self.dones = torch.zeros(horizon, num_envs, device=device)
        self.values = torch.zeros(horizon, num_envs, device=device)
        self.log_probs = torch.zeros(horizon, num_envs, device=device)
        self.step_idx = 0

    def insert(self, obs, actions, rewards, dones, values, log_probs):
        i = self.step_idx
        self.obs[i].copy_(obs)
        self.actions[i].copy_(actions)
        self.rewards[i].copy_(rewards)
        self.dones[i].copy_(dones)
        self.values[i].copy_(values)
        self.log_probs[i].copy_(log_probs)
        self.step_idx += 1


class Runner:
    def __init__(self, env, num_envs: int, horizon: int = 24, device="cuda"):
        self.env = env
        self.num_envs = num_envs
        self.horizon = horizon
        self.device = device
        self.policy = ActorCritic(48, 12).to(device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.storage = RolloutStorage(num_envs, horizon, 48, 12, device)
        self.ep_returns = deque(maxlen=100)
        self.cur_return = torch.zeros(num_envs, device=device)
        self.writer = None

    def collect(self, obs):
        self.storage.step_idx = 0
        for t in range(self.horizon):  # the rollout loop: it calls env.step, so its body is hot
            with torch.no_grad():
                actions, log_probs, values = self.policy.act(obs)
            next_obs, rewards, dones, infos = self.env.step(actions)
            self.storage.insert(obs, actions, rewards, dones, values, log_probs)
            self.cur_return += rewards
            done_ids = dones.nonzero(as_tuple=False).squeeze(-1)  # expect: PK106
            for i in done_ids.tolist():  # expect: PK102
                self.ep_returns.append(self.cur_return[i].item())  # expect: PK101
            self.cur_return[dones] = 0.0
            if dones.any():  # expect: PK103
                self.writer.add_scalar("episode/return", self.cur_return.mean(), t)  # expect: PK105
            obs = next_obs
        return obs

    def update(self, epochs: int = 5, minibatch: int = 4096):
        batch = self.horizon * self.num_envs
        obs = self.storage.obs.view(batch, -1)
        actions = self.storage.actions.view(batch, -1)
        old_log_probs = self.storage.log_probs.view(batch)
        returns = self.storage.rewards.view(batch)
        for _ in range(epochs):
            perm = torch.randperm(batch, device=self.device)  # expect: PK201
            for start in range(0, batch, minibatch):  # minibatches: strided, not per env
                idx = perm[start:start + minibatch]
                mu, value = self.policy(obs[idx])
                dist = torch.distributions.Normal(mu, self.policy.log_std.exp())
                ratio = torch.exp(dist.log_prob(actions[idx]).sum(-1) - old_log_probs[idx])
                loss = -(ratio.clamp(0.8, 1.2)).mean() + F.mse_loss(value, returns[idx])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
        return loss.detach()

    def learn(self, iterations: int):
        obs, _ = self.env.reset()
        for it in range(iterations):
            start = time.perf_counter()
            obs = self.collect(obs)
            loss = self.update()
            fps = self.horizon * self.num_envs / (time.perf_counter() - start)  # expect: PK401
            if it % 10 == 0:
                mean_ret = sum(self.ep_returns) / max(len(self.ep_returns), 1)
                print(f"it {it} fps {fps:.0f} return {mean_ret:.2f} loss {loss.item():.4f}")
