"""Per-step code the linter did not find on the held-out sample (benchmarks/lint_heldout), one general cause per
test on a small file written here: how RL code is shaped (generic base classes, learner updates called from
another package's trainer, a worker that steps its envs once per call), not any codebase's names. Each test
fails on the linter before the fix."""

from __future__ import annotations

import textwrap

from perfkit.lint import Options, lint_source
from tests.lint.test_lint_real_causes import lint, lint_tree


def conf(src: str, **options):
    return [(v.line, v.rule, v.confidence) for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


# -- generic base classes -----------------------------------------------------------------------------------

def test_a_subclass_of_a_generic_base_runs_the_overrides_its_base_calls(tmp_path):
    # Algorithm[TPolicy] is the class Algorithm: its update() runs the subclass's _update_with_batch
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": """
            from typing import Generic, TypeVar
            T = TypeVar("T")
            class Algorithm(Generic[T]):
                def update(self, buffer):
                    return self._update_with_batch(buffer.sample())
                def _update_with_batch(self, batch):
                    raise NotImplementedError
            """,
        "pkg/ppo.py": """
            import torch
            from pkg.base import Algorithm
            class PPO(Algorithm[int]):
                def _update_with_batch(self, batch):
                    loss = self.net(batch).mean()
                    return {"loss": loss.item()}
            """,
    }
    found = lint_tree(tmp_path, files)
    assert found == [("ppo.py", 7, "PK101")]


# -- learner updates ------------------------------------------------------------------------------------------

def test_a_learner_method_that_makes_a_gradient_step_is_a_proven_hot_path_whoever_calls_it():
    # no caller in the linted files (a trainer in another package calls it); the optimizer wrapper does backward
    src = """
    import torch
    class DQN:
        def _update_with_batch(self, batch):
            loss = self.compute_loss(batch)
            self.optim.step(loss)
            return {"loss": loss.item()}
        def optimize_model(self, batch):
            loss = self.compute_loss(batch)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.losses.append(loss.item())
        def summarize(self, batch):
            loss = self.compute_loss(batch)
            return loss.item()
    """
    assert conf(src, min_confidence="high") == [(7, "PK101", "high"), (13, "PK101", "high")]


def test_a_train_function_that_is_a_whole_run_is_hot_only_in_its_gradient_loop():
    src = """
    import torch
    def train(cfg, model, optim, loader):
        stats = torch.zeros(4, device="cuda")
        print(stats.sum().item())
        for batch in loader:
            loss = model(batch).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            print(loss.item())
    """
    assert conf(src) == [(11, "PK101", "high")]


def test_a_method_named_like_a_learner_without_a_gradient_step_is_not_a_seed():
    src = """
    import torch
    class Normalizer:
        def update_stats(self, x: torch.Tensor):
            self.count += x.shape[0]
            self.mean_value = self.mean.item()
    """
    assert lint(src) == []


# -- a function that steps the envs once ----------------------------------------------------------------------

def test_a_function_that_steps_the_envs_once_outside_a_loop_is_per_step():
    # a sampler worker's handler: called once per env step by an event loop the linter cannot see
    src = """
    import torch
    class VectorEnvRunner:
        def advance_rollouts(self, policy_outputs: dict):
            actions = self._to_env(policy_outputs["actions"])
            obs, rewards, terminated, truncated, infos = self.vec_env.step(actions)
            self._count_done(terminated | truncated)
            return obs

        def _to_env(self, actions: torch.Tensor):
            return actions.cpu().numpy()

        def _count_done(self, dones: torch.Tensor):
            return dones.sum().item()

        def check_env(self, actions: torch.Tensor):
            obs = self.vec_env.step(actions)
            return obs.mean().item()
    """
    assert lint(src) == [(11, "PK102"), (14, "PK101")]


def test_a_profiler_or_scheduler_step_once_is_not_an_env_step():
    src = """
    import torch
    class Hook:
        def __call__(self, batch: torch.Tensor):
            self.profiler.step()
            return batch.sum().item()
    class Sched:
        def on_epoch(self, metric: torch.Tensor):
            self.lr_scheduler.step(metric.item())
    """
    assert lint(src) == []
