"""One small snippet per cause of wrong or missed findings seen on real RL codebases (written here, not copied):
each test fails on the behaviour that was wrong and passes on the fixed one."""

from __future__ import annotations

import textwrap

from perfkit.lint import Options, lint_paths, lint_source
from tests.lint.helpers import lint_project


def lint(src: str, **options):
    return [(v.line, v.rule) for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


def rules(src: str, **options):
    return [r for _, r in lint(src, **options)]


def lint_tree(tmp_path, files: dict, **options):
    """(file, line, rule) of the project ``files``."""
    return sorted((v.path.rsplit("/", 1)[-1], v.line, v.rule) for v in lint_project(tmp_path, files, **options))


# -- loop rules: only per-env device work ------------------------------------------------------------

def test_loops_over_seeds_agents_heads_and_rnn_state_tuples_are_quiet():
    src = """
    import torch
    class Runner:
        def step(self, actions: torch.Tensor):
            for seed in self.seeds:
                self.reset_with(seed)
            for agent in self.agents:
                agent.act(actions)
            outs = [head(actions) for head in self.action_heads]
            hidden = (torch.zeros(2, 3, device="cuda"), torch.zeros(2, 3, device="cuda"))
            hidden = tuple(h.transpose(0, 1) for h in hidden)
            for i in range(self.num_envs):
                self.envs[i].step_cpu()
            return outs
    """
    assert [r for r in rules(src) if r.startswith("PK3")] == []


def test_a_loop_over_envs_that_launches_kernels_per_env_is_reported():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            self.pos = torch.zeros(n, 3, device="cuda")
        def step(self, actions: torch.Tensor):
            for i in range(self.num_envs):
                self.pos[i] += actions[i]
    """
    assert "PK301" in rules(src)


def test_numpy_arrays_from_a_cpu_vecenv_are_not_tensors():
    src = """
    import numpy as np
    import torch
    def collect(env, policy, obs):
        for _ in range(100):
            actions = policy(torch.as_tensor(obs)).cpu().numpy()
            obs, rewards, dones, infos = env.step(actions)
            for idx, done in enumerate(dones):
                if done:
                    pass
            if dones.any():
                obs = env.reset()
            n = rewards.sum().item()
    """
    got = lint(src)
    assert (6, "PK102") in got  # the one real sync: the policy's actions copied to the host
    assert not [g for g in got if g[0] >= 8], got


# -- host data ------------------------------------------------------------------------------------

def test_values_already_moved_to_the_host_and_float_reassignments_do_not_sync():
    src = """
    import torch
    class Algo:
        def update(self, loss: torch.Tensor, x: torch.Tensor):
            host = loss.detach().cpu()
            v = host.item()
            x = float(x.sum())
            if x > 0.5:
                pass
            return v
    """
    got = lint(src)
    # the .cpu() copy and float(x.sum()) sync; the .item() of the host copy and the test of the float do not
    assert got == [(5, "PK102"), (7, "PK104")], got


def test_isinstance_guards_narrow_the_kind():
    src = """
    import numpy as np
    import torch
    class Logger:
        def update(self, value, arr: torch.Tensor):
            if isinstance(value, np.ndarray):
                value = value.tolist()
            if not isinstance(arr, torch.Tensor):
                n = arr.item()
            else:
                n = arr.sum().item()
            return value, n
    """
    assert lint(src) == [(11, "PK101")]


def test_strings_lists_and_tuples_are_host_data():
    src = """
    import torch
    class Env:
        def step(self, actions: torch.Tensor):
            names = ["a", "b"]
            if names:
                pass
            ok = names or ("x",)
            return f"{names}"
    """
    assert rules(src) == []


# -- unknown receivers, register_buffer, TensorDict values ------------------------------------------

def test_unknown_receivers_of_sync_prone_methods_are_medium_off_proven_per_step_paths_and_high_on_them():
    # issue 20: a manager env's per-step reset_buf.nonzero() in step() was hidden by --min-confidence high;
    # on a proven per-step path (an env's step, a rollout loop, a learner's update) it is high
    src = """
    import torch
    class Env:
        def {name}(self, actions: torch.Tensor):
            ids = self.reset_buf.nonzero(as_tuple=False)
            if self.reset_buf.any():
                pass
            v = self.stats.item()
    """
    got = lint_source(textwrap.dedent(src.format(name="compute_stats")), "t.py")
    assert [(v.rule, v.confidence) for v in got] == [("PK106", "medium"), ("PK103", "medium"), ("PK101", "medium")]
    assert lint_source(textwrap.dedent(src.format(name="compute_stats")), "t.py", Options(min_confidence="high")) == []
    got = lint_source(textwrap.dedent(src.format(name="step")), "t.py", Options(min_confidence="high"))
    assert [(v.rule, v.confidence) for v in got] == [("PK106", "high"), ("PK103", "high"), ("PK101", "high")]


def test_register_buffer_buffers_are_tensors():
    src = """
    import torch
    class Norm(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("count", torch.zeros(1, device="cuda"))
        def forward(self, x: torch.Tensor):
            if self.count > 10:
                pass
            return x
    """
    got = lint_source(textwrap.dedent(src), "t.py")
    assert [(v.line, v.rule, v.confidence) for v in got] == [(8, "PK103", "high")]


def test_tensordict_values_are_tensors():
    src = """
    import torch
    from tensordict import TensorDict
    class Env:
        def _step(self, tensordict):
            done = tensordict["next", "done"]
            if done.any():
                pass
            r = tensordict.get("reward").sum().item()
            nxt = tensordict["next"]
            return TensorDict({"done": done}, batch_size=[])
    """
    got = lint_source(textwrap.dedent(src), "t.py")
    assert [(v.line, v.rule, v.confidence) for v in got] == [(7, "PK103", "high"), (9, "PK101", "high")]


# -- hot by name only ----------------------------------------------------------------------------------

def test_compute_helpers_called_only_from_setup_are_cold_and_a_reset_classmethod_builds():
    src = """
    import torch
    class Entity:
        def __init__(self, model):
            self.idx = self._compute_indexing(model)
        def initialize(self, model):
            self.more = self._compute_offsets(model)
        def _compute_indexing(self, model):
            return torch.tensor([b.id for b in model.bodies], device="cuda")
        def _compute_offsets(self, model):
            return torch.tensor(model.offsets, device="cuda").cpu().numpy()
        @classmethod
        def reset(cls, cfg):
            return cls(torch.tensor(cfg.values, device="cuda").tolist())
    """
    assert rules(src) == []


def test_a_compute_helper_called_from_the_step_stays_hot():
    src = """
    import torch
    class Env:
        def step(self, actions: torch.Tensor):
            self._compute_reward(actions)
        def _compute_reward(self, actions):
            return actions.sum().item()
    """
    assert rules(src) == ["PK101"]


def test_per_step_names_compute_apply_call_train_and_env_step_loops():
    src = """
    import torch
    class RewardManager:
        def compute(self, dt: float):
            return self.buf.sum().item()
    class ActionManager:
        def apply(self):
            return self.buf.sum().item()
    class HeightTerm:
        def __call__(self, env):
            return env.height.mean().item()
    class PPO:
        def train(self):
            return self.loss.item()
    class Model(torch.nn.Module):
        def train(self, mode=True):
            return self.loss.item()
    def rollout(agent, env, n):
        for _ in range(n):
            agent.env_step(env)
            agent.metrics.item()
        while True:
            step_and_maybe_reset(env)
            env.flag.item()
    """
    got = lint(src)
    assert got == [(5, "PK101"), (8, "PK101"), (11, "PK101"), (14, "PK101"), (21, "PK101"), (24, "PK101")], got


# -- hot paths across modules -------------------------------------------------------------------------

def test_hotness_flows_into_helpers_defined_in_other_modules(tmp_path):
    got = lint_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/utils.py": """
            import torch
            def check_nan(x: torch.Tensor):
                if torch.isnan(x).any():
                    raise ValueError("nan")
            def unused(x: torch.Tensor):
                return x.sum().item()
        """,
        "pkg/storage.py": """
            import torch
            class RolloutBuffer:
                def add(self, value: torch.Tensor):
                    self.values.append(value.cpu())
        """,
        "pkg/logger.py": """
            import torch
            class Logger:
                def record_step(self, rewards: torch.Tensor):
                    self.total += rewards.sum().item()
        """,
        "pkg/runner.py": """
            import torch
            from .utils import check_nan
            from pkg.storage import RolloutBuffer
            from . import logger as log_mod
            class Runner:
                def __init__(self):
                    self.buffer = RolloutBuffer()
                    self.logger = log_mod.Logger()
                def learn(self, env, policy, obs):
                    for _ in range(24):
                        actions = policy(obs)
                        obs, rew, done, info = env.step(actions)
                        check_nan(obs)
                        self.buffer.add(rew)
                        self.logger.record_step(rew)
        """,
    })
    assert got == [("logger.py", 5, "PK101"), ("storage.py", 5, "PK102"), ("utils.py", 4, "PK103")], got


def test_methods_inherited_from_a_base_class_in_another_module_see_its_tensors(tmp_path):
    got = lint_tree(tmp_path, {
        "envs/__init__.py": "",
        "envs/base.py": """
            import torch
            class BaseEnv:
                def __init__(self, n):
                    self.reset_buf = torch.zeros(n, dtype=torch.bool, device="cuda")
        """,
        "envs/legged.py": """
            import torch
            from envs.base import BaseEnv
            class Legged(BaseEnv):
                def step(self, actions: torch.Tensor):
                    ids = self.reset_buf.nonzero()
                    return ids
        """,
    })
    assert got == [("legged.py", 6, "PK106")]


# -- severity and confidence ---------------------------------------------------------------------------

def test_pk401_ignores_host_schedulers_and_synchronizing_callees(tmp_path):
    got = lint_tree(tmp_path, {
        "m.py": """
            import time
            import torch
            def read(t: torch.Tensor):
                return t.cpu()
            def bench(model, x: torch.Tensor, scheduler):
                t0 = time.perf_counter()
                scheduler.update()
                t1 = time.perf_counter() - t0
                y = model(x) * 2
                read(y)
                t2 = time.perf_counter() - t1
                return t1, t2
        """,
    })
    assert got == []


def test_pk401_is_an_error_only_with_known_device_work():
    src = """
    import time
    import torch
    def bench(x: torch.Tensor, env, a):
        t0 = time.perf_counter()
        y = x @ x
        t1 = time.perf_counter() - t0
        env.step(a)
        t2 = time.perf_counter() - t0
        return t1, t2
    """
    got = lint_source(textwrap.dedent(src), "t.py")
    assert [(v.line, v.rule, v.severity, v.confidence) for v in got] == [
        (7, "PK401", "error", "high"), (9, "PK401", "warning", "medium")]


def test_a_or_b_on_tensors_is_one_finding():
    src = """
    import torch
    class Env:
        def step(self, a: torch.Tensor, b: torch.Tensor):
            if (a > 0).any() or (b > 0).any():
                pass
            c = a.any() and b.all()
    """
    assert lint(src) == [(5, "PK103"), (7, "PK103")]


# -- the new rules -------------------------------------------------------------------------------------

def test_index_writes_follow_the_measured_sync_semantics():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            self.buf = torch.zeros(n, device="cuda")
            self.mask = torch.zeros(n, dtype=torch.bool, device="cuda")
            self.zero = torch.zeros((), device="cuda")
        def reset_idx(self, env_ids: torch.Tensor, y: torch.Tensor):
            self.buf[env_ids] = 0.0
            self.buf[5] = 0.0
            self.buf[self.mask] = y
            self.buf[self.mask] = 0.0
            self.buf[env_ids] = y
            self.buf[env_ids] = self.zero
            self.buf[2:9] = 1.0
            self.buf.index_fill_(0, env_ids, 0.0)
    """
    assert lint(src) == [(9, "PK113"), (10, "PK113"), (11, "PK113")]


def test_warp_allocations_in_per_step_code_outside_capture():
    src = """
    import warp as wp
    class Sim:
        def __init__(self, n):
            self.buf = wp.zeros(n, dtype=float)
        def step(self):
            tmp = wp.empty(16, dtype=float)
            view = wp.array(ptr=self.buf.ptr, shape=(4,), dtype=float)
            with wp.ScopedCapture() as cap:
                scratch = wp.zeros(16, dtype=float)
            return tmp, view, cap, scratch
    """
    assert lint(src) == [(7, "PK204")]


def test_calls_recorded_into_a_cuda_graph_do_not_make_their_callees_hot(tmp_path):
    got = lint_tree(tmp_path, {
        "physics.py": """
            import warp as wp
            def integrate(d):
                scratch = wp.zeros(16, dtype=float)
                return scratch
            def collide(d):
                tmp = wp.empty(16, dtype=float)
                return tmp
        """,
        "sim.py": """
            import warp as wp
            import physics
            class Sim:
                def __init__(self, d):
                    self.d = d
                def step(self):
                    with wp.ScopedCapture() as capture:
                        physics.integrate(self.d)
                    physics.collide(self.d)
                    return capture
        """,
    })
    assert got == [("physics.py", 7, "PK204")]


def test_a_scalar_write_through_nonzero_ids_is_its_own_sync_as_the_profiler_counts_it():
    # issue 18: `ret[ids] = 0.0` with ids from .nonzero() syncs a second time (the scalar's copy); the
    # profiler reports both sites, so the linter does too, as it does for a parameter named env_ids
    src = """
    import torch
    class Env:
        def step(self, done: torch.Tensor, ret: torch.Tensor, env_ids: torch.Tensor):
            ids = done.nonzero(as_tuple=True)[0]
            ret[ids] = 0.0
            ret[env_ids] = 0.0
            self_ids = self.reset_buf.nonzero().squeeze(-1)
            ret[self_ids] = 0.0
    """
    assert lint(src) == [(5, "PK106"), (6, "PK113"), (7, "PK113"), (8, "PK106"), (9, "PK113")]


def test_calls_of_the_iteration_loop_around_a_step_loop_are_hot_but_not_proven(tmp_path):
    # once per training iteration is per-step work in both labelled samples (a runner's per-iteration logger);
    # what the iteration loop calls is hot, but only the step loop's callees are proven per-step
    files = {
        "algo.py": """
            import torch
            class Algo:
                def log_iteration(self, x: torch.Tensor, y):
                    self.x = x.mean().item()
                    self.y = y.item()
                def record_step(self, x: torch.Tensor, y):
                    self.x = x.mean().item()
                    self.y = y.item()
        """,
        "train.py": """
            import torch
            from algo import Algo
            def main(env, policy, obs, iterations):
                algo = Algo()
                for it in range(iterations):
                    for _ in range(24):
                        obs, rew, done, info = env.step(policy(obs))
                        algo.record_step(rew, policy.value)
                    algo.log_iteration(rew, policy.value)
                    print(rew.mean())
        """,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    got = sorted((v.path.rsplit("/", 1)[-1], v.line, v.rule, v.confidence)
                 for v in lint_paths([str(tmp_path)], Options()).violations)
    assert got == [("algo.py", 5, "PK101", "high"), ("algo.py", 6, "PK101", "medium"), ("algo.py", 8, "PK101", "high"),
                   ("algo.py", 9, "PK101", "high"), ("train.py", 11, "PK105", "high")], got
