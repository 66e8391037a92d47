"""stable-baselines3's PPO training a small torch env (examples/stacks/sb3_torch_env.py) under
``perfkit profile``: the rollout loop and the update live inside the library (``model.learn``).

The script runs unchanged; SB3's ``VecEnv.step`` is the step; the user's wrapper's per-env loop and
its syncs are found; SB3's own syncs sit at SB3's lines, with the library's name and version, in
their segment, chained to ``model.learn(...)``.
"""

from __future__ import annotations

import pytest

from _stacks_helpers import STACKS, assert_library, assert_runs_as_without, chain_of, line_of, module_file, per_update_rate, plain_and_profiled, sync_at

SCRIPT = STACKS / "sb3_torch_env.py"
NUM_ENVS, ITERATIONS, NUM_STEPS, EPOCHS, MINI_BATCHES = 32, 6, 16, 2, 2
ARGS = ["--num-envs", str(NUM_ENVS), "--iterations", str(ITERATIONS), "--num-steps", str(NUM_STEPS),
        "--epochs", str(EPOCHS), "--mini-batches", str(MINI_BATCHES)]
WARMUP = NUM_STEPS  # the script's first model.learn call: one rollout
TIMED_LEARN = "model.learn(total_timesteps=(args.iterations - 1) * rollout, reset_num_timesteps=False)"



@pytest.fixture(scope="module")
def runs(stacks_workdir):
    return plain_and_profiled(stacks_workdir, SCRIPT, ARGS, WARMUP)


@pytest.fixture(scope="module")
def run(runs):
    assert runs[1].returncode == 0, runs[1].describe()
    return runs[1].record()


# ---------------------------------------------------------------------------------------- runs as without perfkit


def test_runs_under_perfkit_as_without(runs):
    plain, profiled = runs
    assert_runs_as_without(plain, profiled, NUM_ENVS)


def test_sb3_vec_env_step_is_the_step_counted_once(run):
    assert run.total_steps == ITERATIONS * NUM_STEPS
    assert run.steps == ITERATIONS * NUM_STEPS - WARMUP


def test_the_wrappers_per_env_loop_and_its_syncs_are_found(run):
    loop_line = line_of(SCRIPT, "for idx in range(self.num_envs):")
    loops = [f for f in run.findings if f.kind == "loop" and f.line == loop_line and f.path.endswith("sb3_torch_env.py")]
    assert len(loops) == 1, [f"{f.path}:{f.line}" for f in run.findings if f.kind == "loop"]
    assert loops[0].per_step == pytest.approx(NUM_ENVS, rel=0.1)
    member = sync_at(run, "examples/stacks/sb3_torch_env.py", "if idx in reset_ids:")
    assert member.op == "x in t" and member.per_step == pytest.approx(NUM_ENVS, abs=NUM_ENVS / run.steps + 1e-9)


# ---------------------------------------------------------------------------------------- attribution, rates, segments


def test_minibatch_item_is_reported_at_ppo_train_with_its_library(run):
    code = "pg_losses.append(policy_loss.item())"
    f = sync_at(run, "stable_baselines3/ppo/ppo.py", code)
    assert f.line == line_of(module_file("stable_baselines3.ppo.ppo"), code)
    assert_library(f, "stable-baselines3")
    rate, tol = per_update_rate(EPOCHS, MINI_BATCHES, NUM_STEPS, ITERATIONS - 1)
    assert f.per_step == pytest.approx(rate, abs=tol)


def test_chain_runs_from_the_sb3_line_to_the_scripts_learn_call(run):
    f = sync_at(run, "stable_baselines3/ppo/ppo.py", "pg_losses.append(policy_loss.item())")
    chain = chain_of(f)
    algo = module_file("stable_baselines3.common.on_policy_algorithm")
    assert chain[0].endswith(f"stable_baselines3/ppo/ppo.py:{f.line}")
    assert any(c.endswith(f"stable_baselines3/common/on_policy_algorithm.py:{line_of(algo, 'self.train()')}") for c in chain)
    assert chain[-1].endswith(f"examples/stacks/sb3_torch_env.py:{line_of(SCRIPT, TIMED_LEARN)}")


def test_minibatch_items_are_in_the_learner_segment(run):
    for code in ("pg_losses.append(policy_loss.item())", "value_losses.append(value_loss.item())",
                 "entropy_losses.append(entropy_loss.item())"):
        assert sync_at(run, "stable_baselines3/ppo/ppo.py", code).segment == "learner", code


def test_rollout_action_readback_is_reported_in_sb3_once_per_step(run):
    f = sync_at(run, "stable_baselines3/common/on_policy_algorithm.py", "actions = actions.cpu().numpy()")
    assert f.op == ".cpu()"
    assert_library(f, "stable-baselines3")
    assert f.per_step == pytest.approx(1.0, abs=1.0 / run.steps + 1e-9)
