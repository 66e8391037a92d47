"""Issue 20's mistake kinds, one small file each: the linter's reading of types along the control flow, of
host data, of hot paths and of names. Each test fails on the linter before the fix (main a9a8ae5)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from perfkit.lint import Options, lint_source
from perfkit.lint.infer import BOOL, CPU, HOST, NDARRAY, TENSOR, join_kinds
from tests.lint.test_lint_real_causes import lint, lint_tree

ROOT = Path(__file__).resolve().parents[2]


def conf(src: str, **options):
    return [(v.line, v.rule, v.confidence) for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


# -- flow-sensitive typing -----------------------------------------------------------------------------------

def test_an_else_branch_binding_a_number_does_not_hide_the_tensor_of_the_other_branch():
    src = """
    import torch
    class Algo:
        def step(self, x: torch.Tensor):
            if self.cfg.log:
                loss = x.sum()
            else:
                loss = 0
            if self.cfg.log:
                self.total += loss.item()
    """
    assert lint(src) == [(10, "PK101")]


def test_if_else_both_binding_host_values_kill_the_tensor_before():
    src = """
    import torch
    class Algo:
        def step(self, x: torch.Tensor):
            v = x.sum()
            if self.cfg.a:
                v = 1.0
            else:
                v = 2.0
            return v.item()
    """
    assert lint(src) == []


def test_the_other_branch_of_the_if_holding_the_use_does_not_reach_it():
    src = """
    import torch
    class Algo:
        def step(self, x: torch.Tensor):
            if self.cfg.a:
                v = x.sum()
            else:
                v = 0.5
                print(f"{v}")
    """
    assert lint(src) == []


def test_an_else_binding_true_does_not_erase_a_device_mask_attribute():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            if n > 1:
                self.flag = torch.zeros(n, dtype=torch.bool, device="cuda")
            else:
                self.flag = True
        def step(self, a):
            if self.flag.any():
                pass
    """
    assert conf(src) == [(10, "PK103", "high")]


def test_isinstance_narrows_inside_conditional_expressions_and_boolean_operators():
    src = """
    import torch
    class Logger:
        def step(self, value: torch.Tensor | float):
            a = bool(value) if not isinstance(value, torch.Tensor) else 0
            b = isinstance(value, torch.Tensor) or float(value)
            c = value.item() if isinstance(value, torch.Tensor) else value
            return a, b, c
    """
    assert lint(src) == [(7, "PK101")]


def test_join_of_kinds_is_independent_of_order():
    import itertools

    for kinds in ([HOST, CPU, HOST], [HOST, TENSOR, CPU], [BOOL, TENSOR], [BOOL, HOST]):
        got = {join_kinds(p) for p in itertools.permutations(kinds)}
        assert len(got) == 1, (kinds, got)
    assert join_kinds([BOOL, HOST]) == BOOL and join_kinds([BOOL, TENSOR]) == TENSOR
    # host kinds that disagree stay host (never a sync): a host tensor, else numpy, else Python data
    assert join_kinds([HOST, CPU]) == CPU and join_kinds([HOST, NDARRAY]) == NDARRAY and join_kinds([HOST, None]) is None


# -- host data read as device data --------------------------------------------------------------------------

def test_a_gym_env_step_returns_host_data_in_a_torch_module():
    src = """
    import gymnasium as gym
    import torch
    class Trainer:
        def __init__(self):
            self.env = gym.make("CartPole-v1")
        def step(self, action: torch.Tensor):
            obs, rew, term, trunc, info = self.env.step(action.item())
            if term or trunc:
                self.env.reset()
            self.total += float(rew)
        def rollout(self, env, policy, obs):
            for _ in range(8):
                obs, rew, done, info = env.step(policy(obs))
                print(f"{rew}")
    """
    # the action's .item() only: not the numpy results of a gym env, made here or of unknown type
    assert lint(src) == [(8, "PK101")]


def test_a_predicate_called_on_a_tensor_returns_a_python_bool():
    src = """
    import dataclasses
    import torch
    class Env:
        def step(self, obs: torch.Tensor):
            if dataclasses.is_dataclass(obs):
                pass
            if self.has_nan(obs):
                pass
    """
    assert lint(src) == []


# -- PK103: the last operand of and/or in an `if` -----------------------------------------------------------

def test_pk103_checks_the_last_operand_of_and_or_in_a_truth_test():
    src = """
    import torch
    class Env:
        def step(self, t: torch.Tensor):
            if self.cfg.flag and t.any():
                pass
            while not (self.ok or (t > 0).all()):
                pass
            x = self.cfg.flag and t.any()
    """
    assert lint(src) == [(5, "PK103"), (7, "PK103")]  # `x = a and t` returns t: no truth read


# -- `if not X:` is not blanket first-call initialisation ---------------------------------------------------

def test_if_not_is_an_init_guard_only_when_the_block_sets_x_up():
    src = """
    import torch
    import warp as wp
    class Env:
        def step(self, a: torch.Tensor):
            if not self._initialized:
                self.buf = torch.zeros(4, device="cuda")
                self._initialized = True
            if not hasattr(self, "cache"):
                self.cache = torch.zeros(4, device="cuda")
            if not self.cfg.deterministic:
                noise = torch.randn(4, device="cuda")
            if not self.use_graph:
                tmp = wp.zeros(4, dtype=float)
    """
    assert lint(src) == [(12, "PK201"), (14, "PK204")]


# -- PK401: a sync only on the CPU-env branch of a callee ---------------------------------------------------

def test_pk401_ignores_a_sync_only_a_cpu_env_makes():
    src = """
    import time
    import torch
    class Runner:
        def env_step(self, actions):
            if self.device == "cpu":
                return self.env.step(actions.cpu().numpy())
            return self.gpu_env.step(actions)
        def rollout(self, actions: torch.Tensor):
            t0 = time.perf_counter()
            obs = self.env_step(actions)
            dt = time.perf_counter() - t0
            return dt
    """
    assert ("PK401" in [r for _, r in lint(src)])
    synced = src.replace('if self.device == "cpu":', "if self.flag:")
    assert "PK401" not in [r for _, r in lint(synced)]


# -- hot paths ------------------------------------------------------------------------------------------------

def test_an_off_policy_train_with_gradient_steps_is_hot_and_nn_module_train_is_not():
    src = """
    import torch
    class SAC:
        def train(self, gradient_steps: int, batch_size: int = 64):
            for _ in range(gradient_steps):
                loss = self.critic_loss()
                self.losses.append(loss.item())
    class Net(torch.nn.Module):
        def train(self, mode: bool = True):
            return self.flag.item()
    """
    assert conf(src) == [(7, "PK101", "medium")]


def test_a_learner_update_running_backward_is_a_proven_per_step_path():
    src = """
    import torch
    class PPO:
        def update(self):
            for batch in self.storage.mini_batches():
                loss = self.compute_loss(batch)
                loss.backward()
                self.mean_loss += loss.item()
    """
    assert conf(src, min_confidence="high") == [(8, "PK101", "high")]


# -- names ----------------------------------------------------------------------------------------------------

def test_loops_over_agents_are_not_env_loops():
    src = """
    import torch
    class MultiAgentEnv:
        def step(self, actions: torch.Tensor):
            for i in range(self.num_agents):
                self.rew[i] = self.compute(actions[i])
            for agent in range(len(self.agents)):
                actions[agent].clamp_(-1, 1)
            for e in range(self.num_envs):
                actions[e].clamp_(-1, 1)
    """
    assert lint(src) == [(9, "PK301")]


def test_per_forward_distribution_parameters_are_not_state_buffers():
    src = """
    import torch
    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mean = torch.zeros(3, device="cuda")
            self.std = torch.ones(3, device="cuda")
            self.running = torch.zeros(3, device="cuda")
        def forward(self, obs: torch.Tensor):
            self.mean = self.actor(obs) * 2
            self.std = torch.exp(self.log_std)
            self.running = self.running * 0.9 + obs.mean(0)
            return self.mean
    """
    assert lint(src) == [(12, "PK203")]


# -- methods of objects from other modules --------------------------------------------------------------------

def test_annotated_returns_of_methods_of_objects_from_other_modules_type_the_receiver(tmp_path):
    got = lint_tree(tmp_path, {
        "storage.py": """
            import torch
            class Storage:
                def returns(self) -> torch.Tensor:
                    return self._ret
                def counts(self) -> list:
                    return [1, 2]
        """,
        "algo.py": """
            import torch
            from storage import Storage
            class Algo:
                def __init__(self):
                    self.storage = Storage()
                def compute_stats(self):
                    r = self.storage.returns()
                    c = self.storage.counts()
                    return r.mean().item(), c
        """,
    }, min_confidence="high")
    assert got == [("algo.py", 10, "PK101")]


# -- determinism ----------------------------------------------------------------------------------------------

def test_output_is_identical_under_two_hash_seeds(tmp_path):
    # one callee passed a number, a host tensor and a number from three callers (a join that depended on the
    # order of a set), plus the corpus and the examples
    (tmp_path / "hints.py").write_text(textwrap.dedent("""
        import torch
        class Env:
            def _scale(self, x):
                if x:
                    pass
                return x.item()
            def step(self, a: torch.Tensor):
                self._scale(1.0)
                self._scale(torch.zeros(3))
                self._scale(2.0)
            def reset(self):
                self._scale(torch.ones(2))
    """))
    code = ("import sys; from perfkit.lint import lint_paths; r = lint_paths(sys.argv[1:]); "
            "print('\\n'.join(f'{v.path}:{v.line}:{v.col} {v.rule} {v.confidence}' for v in r.violations))")
    targets = [str(tmp_path), str(ROOT / "tests/lint/corpus"), str(ROOT / "examples")]
    outs = []
    for seed in ("1", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        outs.append(subprocess.run([sys.executable, "-c", code, *targets], env=env, capture_output=True, text=True,
                                   check=True, timeout=120).stdout)
    assert outs[0] == outs[1] and outs[0].count("\n") > 20


def test_clone_of_an_unknown_receiver_in_a_gym_wrapper_is_a_medium_allocation():
    # a gymnasium wrapper of a torch env: the wrapped env's type is unknown, so its results are not typed
    # tensors, but `.clone()` is torch's (numpy's is `.copy()`): a PK202, not silence; high since `step` is a
    # proven per-step path (medium off one: tests/lint/test_lint_transfer.py)
    src = """
    import gymnasium
    import torch
    class Repeat(gymnasium.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total = reward.clone()
            host = obs.copy()
            return obs, total, terminated, truncated, info
    """
    assert conf(src) == [(7, "PK202", "high")]


def test_hotness_does_not_reach_a_block_no_hot_caller_runs():
    src = """
    import torch
    class Env:
        def _log(self, x, verbose=False):
            if verbose:
                print(x.item())
            return x.sum()
        def _check(self, x, strict):
            if not strict:
                return x
            return x.any().item()
        def _reset(self, x, full):
            if full:
                x.item()
        def _lenient(self, x, strict):
            if not strict:
                return x
            return x.any().item()
        def step(self, a: torch.Tensor):
            self._log(a)
            self._log(a, verbose=False)
            self._check(a, True)
            self._reset(a, full=self.cfg.full)
            self._lenient(a, False)
    """
    assert lint(src) == [(11, "PK101"), (14, "PK101")]


def test_a_mask_read_joined_with_a_false_default_is_still_a_tensor_truth_test():
    # `any_done = done.any()` in one branch, `any_done = False` in the other: `if any_done:` syncs on the first
    src = """
    import torch
    class Env:
        def step(self, tensordict):
            done = tensordict._get_str("done", default=None)
            if done is not None:
                any_done = done.any()
            else:
                any_done = False
            if any_done:
                pass
    """
    assert conf(src) == [(10, "PK103", "high")]
