"""A single-file CleanRL-style PPO (tests/stacks/cleanrl_ppo.py: a gymnasium vector env, the training
loop inline at module level, SummaryWriter calls inline) under ``perfkit profile``, unchanged: its
syncs land in policy, learner and logging by where they sit in the loop, not in "other"."""

from __future__ import annotations

from pathlib import Path

import pytest

from _stacks_helpers import assert_runs_as_without, plain_and_profiled, sync_at

SCRIPT = Path(__file__).resolve().parent / "cleanrl_ppo.py"
NUM_ENVS, NUM_STEPS, ITERATIONS = 4, 32, 4
ARGS = ["--num-envs", str(NUM_ENVS), "--num-steps", str(NUM_STEPS), "--num-iterations", str(ITERATIONS),
        "--target-kl", "1.0"]  # CleanRL's early stop: `approx_kl > args.target_kl` reads a tensor in the update
WARMUP = 5
HERE = "tests/stacks/cleanrl_ppo.py"


@pytest.fixture(scope="module")
def runs(stacks_workdir):
    return plain_and_profiled(stacks_workdir, SCRIPT, ARGS, WARMUP)


@pytest.fixture(scope="module")
def run(runs):
    assert runs[1].returncode == 0, runs[1].describe()
    return runs[1].record()


def test_runs_under_perfkit_as_without(runs):
    plain, profiled = runs
    assert_runs_as_without(plain, profiled, NUM_ENVS)
    assert plain.line_starting("policy parameter sum: ") == profiled.line_starting("policy parameter sum: ")


@pytest.mark.parametrize("code, segment", [
    # the action handed to env.step: the end of the action sampling
    ("next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())", "policy"),
    # the update loop (it calls backward and optimizer.step)
    ("if args.target_kl is not None and approx_kl > args.target_kl:", "learner"),
    # writer calls, and what is computed only for them
    ('writer.add_scalar("losses/value_loss", v_loss.item(), global_step)', "logging"),
    ("clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]", "logging"),
    ("y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()", "logging"),
])
def test_inline_syncs_land_in_the_segment_of_their_place_in_the_loop(run, code, segment):
    f = sync_at(run, HERE, code)
    assert f.segment == segment
    assert f.function == "<module>"


def test_no_sync_of_the_script_is_left_in_other(run):
    mine = [f for f in run.findings_of("sync") if f.path.replace("\\", "/").endswith(HERE)]
    assert len(mine) >= 5
    assert [f"{f.line}: {f.code}" for f in mine if f.segment == "other"] == []
    for seg in ("policy", "learner", "logging"):
        assert run.segments[seg].cpu_ms_per_step > 0, seg
    assert run.segments["learner"].syncs_per_step > 0 and run.segments["logging"].syncs_per_step > 0


def test_other_is_the_vector_envs_step_and_the_loops_own_code_by_name(run):
    other = run.segments["other"]
    assert other.children, "no breakdown of other"
    assert "SyncVectorEnv.step" in other.children
    assert "cleanrl_ppo.py:<module>" in other.children  # the loop's own code: the named remainder
    assert sum(c.cpu_ms_per_step for c in other.children.values()) >= 0.9 * other.cpu_ms_per_step
