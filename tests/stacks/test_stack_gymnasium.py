"""A batched torch env behind gymnasium wrappers (examples/stacks/gymnasium_wrapped.py), stepped by a
plain loop under ``perfkit profile``.

``gymnasium.make`` wraps the env in ``OrderEnforcing``; the script adds ``ActionRepeat`` (two env
steps per ``step``) and ``EpisodeStatistics``. No wrapper has a ``num_envs`` of its own: it lives on
the wrapped env. The loop's step is the outermost wrapper's (its env's ``num_envs`` found through
the wrappers), counted once: the repeated inner steps are inside it.
"""

from __future__ import annotations

import pytest

from _stacks_helpers import STACKS, submit, sync_at

SCRIPT = STACKS / "gymnasium_wrapped.py"
NUM_ENVS, STEPS, REPEAT = 64, 150, 2
ARGS = ["--num-envs", str(NUM_ENVS), "--steps", str(STEPS), "--warmup", "10", "--action-repeat", str(REPEAT)]
WARMUP = 5



@pytest.fixture(scope="module")
def runs(stacks_workdir):
    plain = submit(stacks_workdir, SCRIPT, ARGS, profile=False)
    profiled = submit(stacks_workdir, SCRIPT, ARGS, profile=True, warmup_steps=WARMUP)
    return plain.result(), profiled.result()


@pytest.fixture(scope="module")
def run(runs):
    assert runs[1].returncode == 0, runs[1].describe()
    return runs[1].record()


def test_runs_under_perfkit_as_without(runs):
    plain, profiled = runs
    assert plain.returncode == 0, plain.describe()
    assert profiled.returncode == plain.returncode, profiled.describe()
    assert plain.sps is not None and profiled.sps is not None, profiled.describe()
    # the controller and the env are deterministic: the same episodes with and without perfkit
    summary = plain.stdout.splitlines()[-2]
    assert "episodes, mean return" in summary and summary in profiled.stdout
    rec = profiled.record()
    assert rec.status == "complete"
    assert rec.num_envs == NUM_ENVS
    assert rec.steps > 0


def test_the_loops_step_is_the_outermost_wrappers_counted_once(run):
    assert run.extra["total_steps"] == STEPS
    assert run.steps == STEPS - WARMUP
    # the env's own reset sync runs once per inner step: REPEAT times per step of the loop
    f = sync_at(run, "examples/stacks/torch_env.py", "reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)")
    assert f.per_step == pytest.approx(REPEAT, abs=REPEAT / run.steps + 1e-9)
