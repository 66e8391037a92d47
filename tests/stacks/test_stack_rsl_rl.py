"""rsl_rl's OnPolicyRunner training a small torch env (examples/stacks/rsl_rl_torch_env.py) under
``perfkit profile``.

The script runs unchanged and the wrapper's step is the step; rsl_rl's own syncs are reported at
rsl_rl's lines (attribution through libraries), with the library's name and version, the right
segment and rate, and the chain of frames back to the script's ``runner.learn(...)`` call.
"""

from __future__ import annotations

import pytest

from _stacks_helpers import STACKS, assert_library, assert_runs_as_without, chain_of, line_of, module_file, per_update_rate, plain_and_profiled, sync_at

SCRIPT = STACKS / "rsl_rl_torch_env.py"
NUM_ENVS, ITERATIONS, NUM_STEPS, EPOCHS, MINI_BATCHES = 64, 8, 16, 2, 2
ARGS = ["--num-envs", str(NUM_ENVS), "--iterations", str(ITERATIONS), "--num-steps", str(NUM_STEPS),
        "--epochs", str(EPOCHS), "--mini-batches", str(MINI_BATCHES), "--hidden", "32"]
WARMUP = NUM_STEPS  # the warm-up is the script's first runner.learn call: one iteration
TIMED_LEARN = "runner.learn(num_learning_iterations=args.iterations - 1)"



@pytest.fixture(scope="module")
def runs(stacks_workdir):
    return plain_and_profiled(stacks_workdir, SCRIPT, ARGS, WARMUP)


@pytest.fixture(scope="module")
def plain(runs):
    return runs[0]


@pytest.fixture(scope="module")
def profiled(runs):
    return runs[1]


@pytest.fixture(scope="module")
def run(profiled):
    assert profiled.returncode == 0, profiled.describe()
    return profiled.record()


# ---------------------------------------------------------------------------------------- runs as without perfkit


def test_runs_under_perfkit_as_without(plain, profiled):
    assert_runs_as_without(plain, profiled, NUM_ENVS)


def test_the_wrappers_step_is_the_step_counted_once(run):
    # the runner calls RslRlVecEnvWrapper.step (num_envs: a property forwarding to the env), which
    # calls CartpoleEnv.step (num_envs: an attribute): one step each time, not two
    assert run.total_steps == ITERATIONS * NUM_STEPS
    assert run.steps == ITERATIONS * NUM_STEPS - WARMUP
    assert any(c.endswith("RslRlVecEnvWrapper") for c in run.extra["step_classes"])


def test_the_envs_own_reset_sync_is_found_once_per_step(run):
    f = sync_at(run, "examples/stacks/torch_env.py", "reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)")
    assert f.per_step == pytest.approx(1.0, abs=1.0 / run.steps + 1e-9)


# ---------------------------------------------------------------------------------------- attribution, rates, segments


def test_minibatch_item_is_reported_at_ppo_update_with_its_library(run):
    f = sync_at(run, "rsl_rl/algorithms/ppo.py", "mean_value_loss += value_loss.item()")
    assert f.line == line_of(module_file("rsl_rl.algorithms.ppo"), "mean_value_loss += value_loss.item()")
    assert f.op == ".item()"
    assert_library(f, "rsl-rl-lib")
    rate, tol = per_update_rate(EPOCHS, MINI_BATCHES, NUM_STEPS, ITERATIONS - 1)
    assert f.per_step == pytest.approx(rate, abs=tol)


def test_chain_runs_from_the_rsl_rl_line_to_the_scripts_learn_call(run):
    f = sync_at(run, "rsl_rl/algorithms/ppo.py", "mean_value_loss += value_loss.item()")
    chain = chain_of(f)
    runner = module_file("rsl_rl.runners.on_policy_runner")
    assert chain[0].endswith(f"rsl_rl/algorithms/ppo.py:{f.line}")
    assert any(c.endswith(f"rsl_rl/runners/on_policy_runner.py:{line_of(runner, 'loss_dict = self.alg.update()')}") for c in chain)
    assert chain[-1].endswith(f"examples/stacks/rsl_rl_torch_env.py:{line_of(SCRIPT, TIMED_LEARN)}")
    assert len(chain) == 3, chain  # ppo.update <- OnPolicyRunner.learn <- the script


def test_minibatch_items_are_in_the_learner_segment(run):
    for code in ("mean_value_loss += value_loss.item()", "mean_surrogate_loss += surrogate_loss.item()",
                 "mean_entropy += entropy.mean().item()"):
        assert sync_at(run, "rsl_rl/algorithms/ppo.py", code).segment == "learner", code
    rate, tol = per_update_rate(EPOCHS, MINI_BATCHES, NUM_STEPS, ITERATIONS - 1)
    assert run.segments["learner"].syncs_per_step >= 3 * (rate - tol)


def test_episode_logger_syncs_are_logging_once_per_step(run):
    code = "self.rewbuffer.extend(self.cur_reward_sum[new_ids][:, 0].cpu().numpy().tolist())"
    f = sync_at(run, "rsl_rl/utils/logger.py", code)
    assert f.line == line_of(module_file("rsl_rl.utils.logger"), code)
    assert f.op == ".cpu()"
    assert f.segment == "logging"
    assert_library(f, "rsl-rl-lib")
    assert f.per_step == pytest.approx(1.0, abs=1.0 / run.steps + 1e-9)
    new_ids = sync_at(run, "rsl_rl/utils/logger.py", "new_ids = (dones > 0).nonzero(as_tuple=False)")
    assert new_ids.segment == "logging" and new_ids.per_step == pytest.approx(1.0, abs=1.0 / run.steps + 1e-9)


def test_nan_checks_are_reported_in_rsl_rl_utils_once_per_step(run):
    for code in ("if torch.isnan(rewards).any():", "if torch.isnan(dones).any():", "if torch.isnan(tensor).any():"):
        f = sync_at(run, "rsl_rl/utils/utils.py", code)
        assert f.op == "bool(t)", code
        assert_library(f, "rsl-rl-lib")
        assert f.per_step == pytest.approx(1.0, abs=1.0 / run.steps + 1e-9), code  # one observation group


def test_user_code_findings_name_no_library(run):
    f = sync_at(run, "examples/stacks/torch_env.py", "reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)")
    assert f.library is None
    assert chain_of(f)[0].endswith(f"examples/stacks/torch_env.py:{f.line}")
