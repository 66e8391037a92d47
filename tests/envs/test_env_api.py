"""Contracts of the reference env on the CPU backend (MuJoCo C): shapes, buffers, resets, errors."""

from __future__ import annotations

import math

import pytest
import torch

from perfkit.envs import make_env

N = 8


@pytest.fixture(scope="module")
def env():
    return make_env("ant", N, backend="mujoco", seed=0)


def _rand_actions(env, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(env.num_envs, env.act_dim, generator=g) * 2 - 1


def test_attributes_describe_the_env(env):
    assert env.backend == "mujoco" and env.name == "ant" and env.num_envs == N
    assert env.device == torch.device("cpu")
    assert (env.obs_dim, env.act_dim) == (27, 8)  # qpos[2:] (13) + qvel (14); 8 hinge motors
    assert env.sim_dt == pytest.approx(0.01)
    assert env.decimation == 4
    assert env.policy_dt == pytest.approx(env.sim_dt * env.decimation)
    assert env.max_episode_steps == 250
    d = env.describe()
    assert d["obs_dim"] == env.obs_dim and d["policy_dt"] == env.policy_dt and d["backend"] == "mujoco"


def test_reset_and_step_return_batched_tensors(env):
    obs = env.reset()
    assert obs.shape == (N, env.obs_dim) and obs.dtype == torch.float32
    assert torch.isfinite(obs).all()
    obs2, reward, done, info = env.step(_rand_actions(env, 0))
    assert obs2 is obs, "step returns the env's own observation buffer"
    assert reward.shape == (N,) and reward.dtype == torch.float32 and torch.isfinite(reward).all()
    assert done.shape == (N,) and done.dtype == torch.bool
    for key in ("terminated", "truncated", "final_return", "final_length", "episode_length"):
        assert info[key].shape == (N,), key
    assert (info["episode_length"] == 1).all()


def test_observation_is_qpos_without_root_xy_then_qvel(env):
    env.reset()
    env.step(_rand_actions(env, 1))
    expected = torch.cat([env.qpos[:, 2:], env.qvel], dim=1).float()
    torch.testing.assert_close(env.obs, expected)


def test_reward_is_forward_velocity_plus_healthy_minus_ctrl_cost(env):
    env.reset()
    a = _rand_actions(env, 2) * 1.5  # some entries beyond [-1, 1]: they are clipped
    env.step(a)
    s = env.spec
    clipped = a.clamp(-1, 1)
    z = env.qpos[:, 2]
    healthy = (z >= s.healthy_z[0]) & (z <= s.healthy_z[1])
    expected = s.forward_weight * env.qvel[:, 0] + s.healthy_reward * healthy - s.ctrl_cost * (clipped**2).sum(1)
    torch.testing.assert_close(env.reward, expected.float(), atol=1e-5, rtol=1e-5)


def test_same_seed_same_trajectory_other_seed_other_start():
    a, b, c = (make_env("ant", 4, backend="mujoco", seed=s) for s in (3, 3, 4))
    oa, ob, oc = a.reset().clone(), b.reset().clone(), c.reset().clone()
    assert torch.equal(oa, ob) and not torch.equal(oa, oc)
    for i in range(5):
        act = _rand_actions(a, i)
        a.step(act)
        b.step(act)
    assert torch.equal(a.obs, b.obs) and torch.equal(a.reward, b.reward)


def test_reset_of_a_subset_leaves_other_worlds_untouched(env):
    env.reset()
    for i in range(10):
        env.step(_rand_actions(env, 10 + i))
    q0, v0 = env.get_state()
    len0 = env.episode_length.clone()
    obs0 = env.obs.clone()
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[1, 4, 6]] = True
    env.reset_where(mask)
    q1, v1 = env.get_state()
    keep = ~mask
    assert torch.equal(q1[keep], q0[keep]) and torch.equal(v1[keep], v0[keep])
    assert torch.equal(env.episode_length[keep], len0[keep])
    assert torch.equal(env.obs[keep], obs0[keep])
    # the reset worlds are back at the initial pose (root at the model's qpos0, small joint noise)
    assert (env.episode_length[mask] == 0).all()
    assert torch.allclose(q1[mask, :3], torch.tensor([0.0, 0.0, 0.6], dtype=torch.float64))
    assert (q1[mask, 7:].abs() <= env.spec.reset_noise + 1e-12).all()
    assert not torch.equal(q1[mask], q0[mask])


def test_exploding_world_is_terminated_and_reset_others_continue(env):
    env.reset()
    env.step(_rand_actions(env, 20))
    q, v = env.get_state()
    v[2, 0] = 50 * env.spec.max_qvel  # the root shot sideways far beyond what the task allows
    env.set_state(q, v)
    _, reward, done, info = env.step(_rand_actions(env, 21))
    assert done[2] and info["terminated"][2]
    assert done.sum() == 1, "only the exploding world ends"
    assert env.qvel[2].abs().max() <= env.spec.reset_noise + 1e-12, "it restarts from the initial state"
    assert torch.isfinite(env.obs).all() and torch.isfinite(reward).all()
    assert env.episode_length[2] == 0 and (env.episode_length[torch.arange(N) != 2] == 1).all()


def test_nan_state_counts_as_terminated_and_earns_nothing(env):
    # MuJoCo C resets a NaN world by itself inside mj_step, so exercise the shared task code directly
    env.reset()
    env.step(_rand_actions(env, 22))
    env.qvel[3, 0] = math.nan
    env.qpos[5, 2] = math.nan
    env.compute_terminations()
    env.compute_reward()
    assert env.terminated[3] and env.terminated[5]
    assert env.terminated.sum() == 2
    assert env.reward[3] == 0.0 and torch.isfinite(env.reward).all()
    no_bonus = env.spec.forward_weight * env.qvel[5, 0] - env.spec.ctrl_cost * (env.actions[5] ** 2).sum()
    assert env.reward[5].item() == pytest.approx(no_bonus.item(), abs=1e-5), "no healthy bonus at a NaN height"
    env.reset()
    assert torch.isfinite(env.qpos).all() and torch.isfinite(env.qvel).all()


def test_truncation_at_the_horizon_reports_the_episode(env):
    env.reset()
    env.episode_length[5] = env.max_episode_steps - 1
    _, reward, done, info = env.step(_rand_actions(env, 30))
    assert done[5] and info["truncated"][5] and not info["terminated"][5]
    assert info["final_length"][5] == env.max_episode_steps
    assert env.episode_length[5] == 0
    assert not done[torch.arange(N) != 5].any()


def test_episode_return_accumulates_rewards_until_done(env):
    env.reset()
    total = torch.zeros(N)
    for i in range(6):
        _, r, d, _ = env.step(_rand_actions(env, 40 + i))
        total += r
        assert not d.any()
    torch.testing.assert_close(env.episode_return, total)


def test_humanoid_loads_from_mujoco_warp_test_data():
    h = make_env("humanoid", 2, backend="mujoco")
    assert (h.obs_dim, h.act_dim) == (26 + 27, 21)
    assert h.sim_dt == pytest.approx(0.005)
    obs, r, d, _ = h.step(torch.zeros(2, 21))
    assert torch.isfinite(obs).all() and not d.any()


def test_ant_model_touches_the_floor_only_through_its_feet():
    from perfkit.envs.models import load_mjmodel

    import mujoco

    m = load_mjmodel("ant")
    colliding = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) for i in range(m.ngeom) if m.geom_contype[i] or m.geom_conaffinity[i]}
    assert colliding == {"floor", "fl_foot", "fr_foot", "bl_foot", "br_foot"}
    primitives = {int(t) for t in (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_CAPSULE)}
    assert {int(t) for t in m.geom_type} <= primitives


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "bad, exc, words",
    [
        (lambda e: torch.zeros(e.num_envs, e.act_dim + 1), ValueError, "shape"),
        (lambda e: torch.zeros(e.num_envs + 1, e.act_dim), ValueError, "shape"),
        (lambda e: torch.zeros(e.num_envs, e.act_dim, dtype=torch.float64), TypeError, "float32"),
        (lambda e: torch.zeros(e.num_envs, e.act_dim, device="meta"), ValueError, "device"),
        (lambda e: [[0.0] * e.act_dim] * e.num_envs, TypeError, "torch.Tensor"),
    ],
)
def test_bad_actions_are_rejected_with_what_was_expected(env, bad, exc, words):
    with pytest.raises(exc, match=words):
        env.step(bad(env))


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(num_envs=0), ValueError, "num_envs must be >= 1"),
        (dict(num_envs=-3), ValueError, "num_envs must be >= 1"),
        (dict(num_envs=2.0), TypeError, "num_envs must be an int"),
        (dict(num_envs=True), TypeError, "num_envs must be an int"),
        (dict(name="cheetah"), ValueError, "unknown env name"),
        (dict(backend="jax"), ValueError, "backend must be one of"),
        (dict(device="cuda:0"), ValueError, "CUDA|cpu"),
        (dict(device="tpu"), ValueError, "device must be"),
        (dict(device="tpu", backend="auto"), ValueError, "device must be"),
    ],
)
def test_bad_factory_arguments_are_rejected(kwargs, exc, words):
    args = dict(name="ant", num_envs=4, backend="mujoco") | kwargs
    with pytest.raises(exc, match=words):
        make_env(**args)


def test_auto_backend_without_cuda_or_on_cpu_is_mujoco():
    assert make_env("ant", 2, device="cpu").backend == "mujoco"
    if not torch.cuda.is_available():
        assert make_env("ant", 2).backend == "mujoco"


def test_reset_where_rejects_a_non_boolean_mask(env):
    with pytest.raises(TypeError, match="bool"):
        env.reset_where(torch.zeros(N, dtype=torch.int64))
    with pytest.raises(ValueError, match="shape"):
        env.reset_where(torch.zeros(N + 1, dtype=torch.bool))
