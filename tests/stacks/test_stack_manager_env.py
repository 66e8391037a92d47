"""The manager-based env (examples/manager_env): its own behaviour in-process, then trained through
rsl_rl's OnPolicyRunner (train_rsl_rl.py) plainly and under ``perfkit profile``.

Its math helpers are ``@torch.jit.script`` functions compiled at import, under perfkit's hooks on
torch functions: the profiled run with TorchScript on must train exactly as without perfkit. The
attribution and segment checks use a run with TorchScript off (``PYTORCH_JIT=0``: the helpers run as
Python, so their ops are seen by the hooks too).
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

from _stacks_helpers import (
    EXAMPLES,
    MANAGER_ENV,
    assert_runs_as_without,
    child_stats,
    line_of,
    module_file,
    per_update_rate,
    submit,
    sync_at,
)

if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

SCRIPT = MANAGER_ENV / "train_rsl_rl.py"
NUM_ENVS, ITERATIONS, NUM_STEPS, EPOCHS, MINI_BATCHES = 64, 4, 8, 2, 2
ARGS = ["--device", "cpu", "--num-envs", str(NUM_ENVS), "--iterations", str(ITERATIONS), "--num-steps", str(NUM_STEPS),
        "--epochs", str(EPOCHS), "--mini-batches", str(MINI_BATCHES), "--hidden", "32,32"]
WARMUP = NUM_STEPS  # the script's first runner.learn call: one iteration
NO_JIT = {"PYTORCH_JIT": "0"}


ENV_RESET_SYNC = "reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)"
HIP_DEVIATION = "angle = data.joint_pos[:, asset_cfg.joint_ids] - data.default_joint_pos[:, asset_cfg.joint_ids]"


# ---------------------------------------------------------------------------------------- in-process


def _make_env(num_envs=16):
    from manager_env import ManagerBasedRLEnv, ant_velocity_env_cfg

    torch.manual_seed(0)
    return ManagerBasedRLEnv(ant_velocity_env_cfg(num_envs=num_envs, backend="mujoco", device="cpu"))


def test_math_helpers_are_torchscript_and_correct():
    from manager_env import math_utils as mu

    for name in ("wrap_to_pi", "quat_mul", "quat_apply", "quat_apply_inverse", "quat_from_euler_xyz", "yaw_quat"):
        assert isinstance(getattr(mu, name), torch.jit.ScriptFunction), name
    g = torch.Generator().manual_seed(1)
    q = mu.normalize(torch.randn(32, 4, generator=g))
    v = torch.randn(32, 3, generator=g)
    assert torch.allclose(mu.quat_apply_inverse(q, mu.quat_apply(q, v)), v, atol=1e-5)
    assert torch.allclose(mu.quat_apply(mu.quat_inv(q), mu.quat_apply(q, v)), v, atol=1e-5)
    roll, pitch, yaw = (torch.rand(32, generator=g) - 0.5 for _ in range(3))
    back = mu.euler_xyz_from_quat(mu.quat_from_euler_xyz(roll, pitch, 6 * yaw))
    assert torch.allclose(back[0], roll, atol=1e-5) and torch.allclose(back[1], pitch, atol=1e-5)
    assert torch.allclose(back[2], mu.wrap_to_pi(6 * yaw), atol=1e-5)
    w = mu.wrap_to_pi(torch.tensor([math.pi, -math.pi, 3 * math.pi, 4.0, -7.0]))
    assert torch.allclose(w, torch.tensor([math.pi, -math.pi, math.pi, 4.0 - 2 * math.pi, -7.0 + 2 * math.pi]), atol=1e-6)


def test_env_steps_its_managers_and_resets_finished_envs_by_index():
    env = _make_env()
    obs, _ = env.reset()
    assert obs["policy"].shape == (16, 36) and obs["critic"].shape == (16, 37)
    env.episode_length_buf[:4] = env.max_episode_length - 1  # these four time out on the next step
    qpos_before = env.scene.physics.qpos.clone()
    obs, reward, terminated, truncated, extras = env.step(torch.zeros(16, 8))
    assert truncated[:4].all() and not truncated[4:].any()
    assert (env.episode_length_buf[:4] == 0).all() and (env.episode_length_buf[4:] == 1).all()
    assert torch.isfinite(reward).all() and torch.isfinite(obs["policy"]).all()
    log = extras["log"]  # episode statistics of the reset envs, as host numbers
    assert isinstance(log["Episode_Reward/alive"], float) and log["Episode_Termination/time_out"] == 4
    assert set(k.split("/")[0] for k in log) == {"Episode_Reward", "Episode_Termination", "Metrics"}
    assert not torch.equal(env.scene.physics.qpos, qpos_before)  # physics advanced
    env.close()


def test_a_runaway_world_is_terminated_and_reset_alone():
    env = _make_env()
    env.reset()
    env.scene.physics.qvel[3, 6:] = 500.0  # world 3's joints spinning far past max_joint_vel
    obs, reward, terminated, truncated, extras = env.step(torch.zeros(16, 8))
    assert terminated.tolist() == [i == 3 for i in range(16)]
    assert extras["log"]["Episode_Termination/diverged"] == 1
    assert env.scene.physics.qvel[3, 6:].abs().max() <= 0.1  # reset: velocities redrawn in [-0.1, 0.1]
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    env.close()


def test_a_joint_subset_resolves_to_a_python_list_and_all_joints_to_a_slice():
    from manager_env.managers import SceneEntityCfg

    env = _make_env()
    cfg = env.cfg.rewards["joint_deviation_hip"].params["asset_cfg"]
    assert cfg.joint_ids == [0, 2, 4, 6]  # fl/fr/bl/br hips: a list, resolved once by the reward manager
    every = SceneEntityCfg("robot", joint_names=".*")
    every.resolve(env.scene)
    assert every.joint_ids == slice(None)  # all joints in order: a slice, no index copy
    knees = SceneEntityCfg("robot", joint_names=[".._knee"])
    knees.resolve(env.scene)
    assert knees.joint_ids == [1, 3, 5, 7]
    env.close()


# ---------------------------------------------------------------------------------------- subprocess runs


@pytest.fixture(scope="module")
def runs(stacks_workdir):
    futures = {
        "plain": submit(stacks_workdir, SCRIPT, ARGS, profile=False),
        "profiled": submit(stacks_workdir, SCRIPT, ARGS, profile=True, warmup_steps=WARMUP),
        "no_jit": submit(stacks_workdir, SCRIPT, ARGS, profile=True, warmup_steps=WARMUP, env=NO_JIT),
    }
    return {k: f.result() for k, f in futures.items()}


@pytest.fixture(scope="module")
def nojit_run(runs):
    assert runs["no_jit"].returncode == 0, runs["no_jit"].describe()
    return runs["no_jit"].record()


def test_trains_through_rsl_rl(runs):
    plain = runs["plain"]
    assert plain.returncode == 0, plain.describe()
    assert plain.sps is not None and plain.sps > 0
    assert plain.line_starting("policy parameter sum: ") is not None
    assert "Learning iteration" in plain.stdout  # rsl_rl's own per-iteration log


def test_runs_under_perfkit_with_torchscript(runs):
    plain, profiled = runs["plain"], runs["profiled"]
    assert_runs_as_without(plain, profiled, NUM_ENVS)


def test_perfkit_does_not_change_what_is_trained(runs):
    plain, profiled = runs["plain"], runs["profiled"]
    assert profiled.returncode == 0, profiled.describe()
    for prefix in ("policy parameter sum: ", "mean episode return "):
        assert plain.line_starting(prefix) is not None
        assert profiled.line_starting(prefix) == plain.line_starting(prefix)


def test_runs_under_perfkit_with_torchscript_off_and_finds_the_envs_syncs(nojit_run):
    run = nojit_run
    assert run.status == "complete" and run.num_envs == NUM_ENVS
    assert run.total_steps == ITERATIONS * NUM_STEPS  # RslRlVecEnvWrapper.step, counted once
    assert any(c.endswith("RslRlVecEnvWrapper") for c in run.extra["step_classes"])
    tol = 1.0 / run.steps + 1e-9
    every_step = {  # (path, code) -> syncs per step, made on every step whatever the data
        ("examples/manager_env/env.py", ENV_RESET_SYNC): 1.0,
        ("examples/manager_env/managers.py", "resample_env_ids = (self.time_left <= 0.0).nonzero().flatten()"): 1.0,
        ("examples/manager_env/mdp/commands.py", "env_ids = self.is_heading_env.nonzero(as_tuple=False).flatten()"): 1.0,
        ("examples/manager_env/mdp/commands.py", "standing_env_ids = self.is_standing_env.nonzero(as_tuple=False).flatten()"): 1.0,
        ("examples/manager_env/managers.py", "if due.any():"): 1.0,
        ("examples/manager_env/mdp/rewards.py", HIP_DEVIATION): 2.0,  # two list indexes on the line
    }
    for (path, code), rate in every_step.items():
        assert sync_at(run, path, code).per_step == pytest.approx(rate, abs=rate * tol), code
    # on the steps that reset envs: episode statistics read back, one .item() per reward term
    item = sync_at(run, "examples/manager_env/managers.py",
                   'extras["Episode_Reward/" + name] = (episodic_sum_avg / self._env.max_episode_length_s).item()')
    assert item.op == ".item()" and item.per_step > 0


def test_reward_terms_syncs_are_in_the_reward_segment(nojit_run):
    f = sync_at(nojit_run, "examples/manager_env/mdp/rewards.py", HIP_DEVIATION)
    assert f.segment == "reward"
    assert nojit_run.segments["reward"].syncs_per_step >= 2.0 - 2.0 / nojit_run.steps
    assert nojit_run.segments["reward"].cpu_ms_per_step > 0


def test_ppo_update_syncs_are_in_the_learner_segment(nojit_run):
    f = sync_at(nojit_run, "rsl_rl/algorithms/ppo.py", "mean_value_loss += value_loss.item()")
    assert f.line == line_of(module_file("rsl_rl.algorithms.ppo"), "mean_value_loss += value_loss.item()")
    assert f.segment == "learner"
    rate, tol = per_update_rate(EPOCHS, MINI_BATCHES, NUM_STEPS, ITERATIONS - 1)
    assert f.per_step == pytest.approx(rate, abs=tol)


def test_other_is_broken_down_by_the_env_steps_callees(nojit_run):
    other = nojit_run.segments["other"]
    tol = 1.0 / nojit_run.steps + 1e-9
    commands = child_stats(other, "CommandManager.compute")
    # timers, heading envs, standing envs (three nonzero) and the scalar written through the standing envs'
    # index (vel_command_b[standing_env_ids, :] = 0.0: a host-to-device copy, measured on the H200)
    assert commands["syncs_per_step"] == pytest.approx(4.0, abs=4 * tol)
    assert commands["cpu_ms_per_step"] > 0
    assert child_stats(other, "EventManager.apply")["syncs_per_step"] >= 1.0 - tol  # the interval timers' .any()
    assert child_stats(other, "ObservationManager.compute")["syncs_per_step"] == 0
    assert child_stats(other, "ObservationManager.compute")["cpu_ms_per_step"] > 0
    assert child_stats(other, "TerminationManager.compute")["syncs_per_step"] == 0


def test_other_is_explained_by_name(nojit_run):
    """The breakdown of other — the env steps' callees, the env steps' own code, the training loop's
    callees and its own code (a named remainder) — covers >= 90 % of other's CPU time, and the
    managers' work is each visible by name."""
    other = nojit_run.segments["other"]
    names = set(other.children)
    for part in ("ObservationManager.compute", "ManagerBasedRLEnv._reset_idx", "EventManager.apply",
                 "CommandManager.compute", "TerminationManager.compute", "ManagerBasedRLEnv.step",
                 "RslRlVecEnvWrapper.step", "OnPolicyRunner.learn"):
        assert any(n.endswith(part) for n in names), (part, sorted(names))
    covered = sum(c.cpu_ms_per_step for c in other.children.values())
    assert covered >= 0.9 * other.cpu_ms_per_step, (covered, other.cpu_ms_per_step, sorted(names))
    # the loop's own code is the remainder: named, and not most of other
    assert other.children["OnPolicyRunner.learn"].cpu_ms_per_step < 0.5 * other.cpu_ms_per_step


def test_the_logger_is_logging_and_the_action_sampling_policy(nojit_run):
    # rsl_rl's Logger.log runs once per iteration after the update (past a warm-up of one iteration);
    # (its `torch.tensor([], device=...)` copies nothing and is no sync: measured on the H200)
    f = sync_at(nojit_run, "rsl_rl/utils/logger.py",
                'self.writer.add_scalar("Policy/mean_std", action_std.mean().item(), it)')
    assert f.segment == "logging" and f.function == "log"
    assert nojit_run.segments["policy"].cpu_ms_per_step > 0
