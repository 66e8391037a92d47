"""The reference env's step is sync-free and allocation-free, checked by perfkit itself.

On this CPU-only machine the budget counts would-sync-on-GPU calls on CPU tensors and torch
allocations (factories, out-of-place ops), so the same test gates regressions in CI.
"""

from __future__ import annotations

import pytest
import torch

import perfkit
from perfkit.envs import make_env


@pytest.fixture(scope="module")
def env():
    e = make_env("ant", 16, backend="mujoco", seed=0)
    e.reset()
    return e


def test_budget_catches_an_allocation_so_the_checks_below_can_fail(env):
    with pytest.raises(perfkit.BudgetExceeded):
        with perfkit.budget(syncs=0, allocs=0):
            env.reward * 2.0


def test_budget_catches_a_would_be_sync_on_cpu(env):
    with pytest.raises(perfkit.BudgetExceeded, match="item"):
        with perfkit.budget(syncs=0):
            bool(env.done[0].item())


def test_step_makes_no_sync_and_no_allocation(env):
    actions = torch.zeros(env.num_envs, env.act_dim)
    env.step(actions)  # first step outside the budget
    with perfkit.budget(syncs=0, allocs=0):
        for _ in range(5):
            env.step(actions)


def test_steps_with_resets_make_no_sync_and_no_allocation(env):
    actions = torch.ones(env.num_envs, env.act_dim)
    env.episode_length[::2] = env.max_episode_steps - 1  # half the worlds reset inside the budget
    with perfkit.budget(syncs=0, allocs=0):
        _, _, done, _ = env.step(actions)
    assert done[::2].all()


def test_masked_reset_makes_no_sync_and_no_allocation(env):
    mask = torch.zeros(env.num_envs, dtype=torch.bool)
    mask[3] = True
    with perfkit.budget(syncs=0, allocs=0):
        env.reset_where(mask)


@pytest.mark.gpu
def test_mjwarp_step_on_cuda_is_captured_sync_free_and_allocation_free():
    e = make_env("ant", 256, backend="mjwarp", device="cuda")
    assert e.captured
    actions = torch.zeros(e.num_envs, e.act_dim, device=e.device)
    e.step(actions)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats(e.device).get("allocation.all.allocated", 0)
    with perfkit.budget(syncs=0, allocs=0):
        for _ in range(10):
            e.step(actions)
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats(e.device).get("allocation.all.allocated", 0) == before
    assert torch.isfinite(e.obs).all()


@pytest.mark.gpu
def test_mjwarp_humanoid_on_cuda_resets_fallen_worlds_without_syncing():
    e = make_env("humanoid", 512, backend="mjwarp", device="cuda")
    actions = torch.ones(e.num_envs, e.act_dim, device=e.device)  # full torque: most worlds fall
    ended = torch.zeros(e.num_envs, dtype=torch.bool, device=e.device)
    with perfkit.budget(syncs=0, allocs=0):
        for _ in range(100):
            _, _, done, _ = e.step(actions)
            ended.logical_or_(done)
    assert ended.any()
    assert torch.isfinite(e.qpos).all() and (e.qpos[:, 2] > 0.5).all()  # fallen worlds were reset
