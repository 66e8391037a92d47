"""The small PPO: GAE, normalizer, sampling/log-probs, the no-sync rollout path, and that it learns."""

from __future__ import annotations

import math

import pytest
import torch

import perfkit
from perfkit.envs import make_env
from perfkit.rl import PPO, ObsNormalizer, PPOConfig, RolloutStorage


def _reference_gae(rewards, values, not_dones, last_values, gamma, lam):
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values)
    for t in reversed(range(T)):
        nv = last_values if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * nv * not_dones[t] - values[t]
        running = delta + gamma * lam * not_dones[t] * running
        adv[t] = running
    return adv, adv + values


def test_gae_matches_the_textbook_recursion():
    g = torch.Generator().manual_seed(0)
    s = RolloutStorage(7, 5, obs_dim=3, act_dim=2, device="cpu")
    s.rewards.copy_(torch.randn(7, 5, generator=g))
    s.values.copy_(torch.randn(7, 5, generator=g))
    s.not_dones.copy_((torch.rand(7, 5, generator=g) > 0.3).float())
    last = torch.randn(5, generator=g)
    s.compute_returns(last, gamma=0.97, lam=0.9)
    adv, ret = _reference_gae(s.rewards, s.values, s.not_dones, last, 0.97, 0.9)
    torch.testing.assert_close(s.advantages, adv)
    torch.testing.assert_close(s.returns, ret)


def test_gae_does_not_bootstrap_across_an_episode_end():
    s = RolloutStorage(2, 1, obs_dim=1, act_dim=1, device="cpu")
    s.rewards.fill_(1.0)
    s.not_dones.copy_(torch.tensor([[0.0], [1.0]]))  # the episode ends at t=0
    s.compute_returns(torch.tensor([100.0]), gamma=0.5, lam=1.0)
    assert s.returns[0, 0].item() == pytest.approx(1.0)  # nothing from t=1 leaks into t=0
    assert s.returns[1, 0].item() == pytest.approx(1.0 + 0.5 * 100.0)


def test_obs_normalizer_tracks_the_running_mean_and_variance():
    g = torch.Generator().manual_seed(1)
    norm = ObsNormalizer(4, eps=1e-8)
    chunks = [torch.randn(50, 4, generator=g) * 3 + 2 for _ in range(4)]
    for c in chunks:
        norm.update(c)
    data = torch.cat(chunks)
    torch.testing.assert_close(norm.mean, data.mean(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.var, data.var(0, unbiased=False), atol=1e-3, rtol=1e-3)
    out = torch.empty(3, 4)
    x = torch.randn(3, 4, generator=g)
    torch.testing.assert_close(norm.normalize_into(x, out), norm(x))


def test_act_samples_and_records_a_consistent_transition():
    ppo = PPO(obs_dim=6, act_dim=3, num_envs=10, seed=0)
    obs = torch.randn(10, 6)
    with torch.inference_mode():
        actions = ppo.act(obs)
    s = ppo.storage
    assert actions.shape == (10, 3) and actions.data_ptr() == s.actions[0].data_ptr()
    torch.testing.assert_close(s.obs[0], obs)
    mean, value = ppo.policy(ppo.normalizer(obs))
    torch.testing.assert_close(s.values[0], value.detach())
    std = torch.exp(ppo.policy.log_std.detach())
    expected = torch.distributions.Normal(mean.detach(), std).log_prob(actions).sum(-1)
    torch.testing.assert_close(s.log_probs[0], expected, atol=1e-5, rtol=1e-5)


def test_rollout_bookkeeping_makes_no_sync_and_no_allocation():
    env = make_env("ant", 8, backend="mujoco")
    ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, cfg=PPOConfig(num_steps=4))
    obs = env.reset()
    with torch.inference_mode():
        obs, r, d, info = env.step(ppo.act(obs))
        ppo.process_env_step(r, d, info)
        with perfkit.budget(syncs=0) as b:  # act: the MLP's own activations are its only allocations
            actions = ppo.act(obs)
        assert b.syncs == 0
        assert all(site.path.endswith("perfkit/rl/networks.py") for site in b.sites), [str(x) for x in b.sites]
        with perfkit.budget(syncs=0, allocs=0):
            obs, r, d, info = env.step(actions)
            ppo.process_env_step(r, d, info)


def test_update_refuses_an_incomplete_rollout():
    ppo = PPO(obs_dim=4, act_dim=2, num_envs=3, cfg=PPOConfig(num_steps=5))
    with pytest.raises(RuntimeError, match="after 0 steps"):
        ppo.update(torch.zeros(3, 4))


@pytest.mark.parametrize("kwargs", [dict(num_steps=0), dict(epochs=-1), dict(minibatches=1.5), dict(gamma=0.0), dict(lam=2.0)])
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(ValueError):
        PPOConfig(**kwargs)


def _ppo_after_one_iteration() -> PPO:
    """4 envs, 2 steps of reward 1; envs 0 and 3 end an episode each step (returns 3 and 5, lengths 10 and 20)."""
    ppo = PPO(obs_dim=2, act_dim=1, num_envs=4, cfg=PPOConfig(num_steps=2))
    done = torch.tensor([True, False, False, True])
    info = {"truncated": torch.zeros(4, dtype=torch.bool), "final_return": torch.tensor([3.0, 0.0, 0.0, 5.0]),
            "final_length": torch.tensor([10, 0, 0, 20], dtype=torch.int32)}
    with torch.inference_mode():
        for _ in range(2):
            ppo.act(torch.zeros(4, 2))
            ppo.process_env_step(torch.ones(4), done, info)
    return ppo


def test_log_iteration_reads_means_once_and_clears():
    ppo = _ppo_after_one_iteration()
    m = ppo.log_iteration()
    assert m["reward_per_step"] == pytest.approx(1.0)
    assert m["episodes"] == 4 and m["episode_return"] == pytest.approx(4.0) and m["episode_length"] == pytest.approx(15.0)
    assert m["sps"] > 0 and math.isfinite(m["action_std"])
    m2 = ppo.log_iteration()
    assert m2["reward_per_step"] == 0.0 and m2["episodes"] == 0
    assert m2["episode_return"] == pytest.approx(4.0), "the last known episode return carries over"


def test_log_iteration_async_on_the_cpu_returns_each_iteration_at_once_without_a_sync():
    import perfkit

    ppo = _ppo_after_one_iteration()
    with perfkit.budget(syncs=0):  # a CPU read through a numpy view made in __init__: no device read
        (m,) = ppo.log_iteration_async()
    assert m["iteration"] == 0 and m["reward_per_step"] == pytest.approx(1.0) and m["episodes"] == 4
    assert m["episode_return"] == pytest.approx(4.0)
    (m2,) = ppo.log_iteration_async()
    assert m2["iteration"] == 1 and m2["episodes"] == 0 and m2["episode_return"] == pytest.approx(4.0)
    assert ppo.drain_metrics() == []


@pytest.mark.gpu
def test_log_iteration_async_on_cuda_never_waits_and_drain_returns_the_rest():
    import perfkit

    ppo = PPO(obs_dim=2, act_dim=1, num_envs=4, device="cuda", cfg=PPOConfig(num_steps=2))
    got = []
    with perfkit.budget(syncs=0, count_cpu_tensors=False):
        for _ in range(6):
            got += ppo.log_iteration_async()
    got += ppo.drain_metrics()
    assert [m["iteration"] for m in got] == list(range(6))
    assert all(m["sps"] > 0 for m in got)
