"""A batched torch env behind gymnasium wrappers (examples/stacks/gymnasium_wrapped.py), stepped by a
plain loop under ``perfkit profile``.

``gymnasium.make`` wraps the env in ``OrderEnforcing``; the script adds ``ActionRepeat`` (two env
steps per ``step``) and ``EpisodeStatistics``. No wrapper has a ``num_envs`` of its own: it lives on
the wrapped env. The loop's step is the outermost wrapper's (its env's ``num_envs`` found through
the wrappers), counted once: the repeated inner steps are inside it.
"""

from __future__ import annotations

import pytest

from _stacks_helpers import STACKS, assert_runs_as_without, plain_and_profiled, sync_at

SCRIPT = STACKS / "gymnasium_wrapped.py"
NUM_ENVS, STEPS, REPEAT = 64, 150, 2
ARGS = ["--num-envs", str(NUM_ENVS), "--steps", str(STEPS), "--warmup", "10", "--action-repeat", str(REPEAT)]
WARMUP = 5



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
    # the controller and the env are deterministic: the same episodes with and without perfkit
    summary = plain.stdout.splitlines()[-2]
    assert "episodes, mean return" in summary and summary in profiled.stdout


def test_the_loops_step_is_the_outermost_wrappers_counted_once(run):
    assert run.total_steps == STEPS
    assert run.steps == STEPS - WARMUP
    # the env's own reset sync runs once per inner step: REPEAT times per step of the loop
    f = sync_at(run, "examples/stacks/torch_env.py", "reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)")
    assert f.per_step == pytest.approx(REPEAT, abs=REPEAT / run.steps + 1e-9)
