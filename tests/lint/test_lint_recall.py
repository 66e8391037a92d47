"""Causes of the findings the linter missed (or got wrong) on the held-out sample (benchmarks/lint_heldout), one
general cause per test on a small file written here: how RL code is shaped (generic base classes, learner updates
called from another package's trainer, a worker that steps its envs once per call, converters that read a tensor
argument on the host, per-iteration logging, error paths), not any codebase's names. Each test fails on the
linter before the fix."""

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

        def evaluate(self, actions: torch.Tensor):
            obs = self.eval_env.step(actions)
            return obs.mean().item()
    """
    found = lint(src)
    assert (11, "PK102") in found and (14, "PK101") in found
    assert not [f for f in found if f[0] >= 16]  # check_env and evaluate step once to check, not to train


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


# -- a project function that copies its argument to the host --------------------------------------------------

CONVERTER = """
    import numpy as np
    import torch

    def to_numpy(x):
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().numpy()
        if isinstance(x, np.ndarray):
            return x
        return np.asanyarray(x)

    def to_scalar(value):
        if isinstance(value, torch.Tensor):
            return value.item()
        return value

    def check_finite(t, name):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}: {t.isnan().sum().item()} NaNs")
"""


def test_a_call_of_a_function_that_copies_a_device_argument_to_the_host_is_reported_where_it_is_called(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/convert.py": CONVERTER,
        "pkg/collector.py": """
            import numpy as np
            import torch
            from pkg.convert import check_finite, to_numpy, to_scalar
            class Collector:
                def collect(self, n: int):
                    for _ in range(n):
                        logits = self.policy(self.obs)
                        act = to_numpy(logits.argmax(dim=1))
                        noise = to_numpy(np.zeros(3))
                        self.obs, rew, done, info = self.env.step(act)
                        self.stats.append(to_scalar(logits.max()))
                        check_finite(logits, "logits")
            """,
    }
    found = [f for f in lint_tree(tmp_path, files) if f[0] == "collector.py"]
    # the numpy argument does not sync; check_finite's .item() is on its error path only
    assert found == [("collector.py", 9, "PK102"), ("collector.py", 12, "PK104")]


def test_an_argument_of_unknown_type_to_such_a_function_stays_medium_on_a_proven_path():
    src = CONVERTER + """
    class Runner:
        def rollout(self, n: int):
            for _ in range(n):
                out = self.policy(self.obs)
                act = to_numpy(out.act)
                self.obs, rew, done, info = self.env.step(act)
    """
    found = [c for c in conf(src) if c[1] == "PK102" and c[0] > 20]
    assert found == [(25, "PK102", "medium")]


# -- per-iteration code ----------------------------------------------------------------------------------------

def test_what_an_iteration_loop_around_the_rollout_calls_is_hot():
    # a runner's learn(): rollout steps, then once per iteration the update and the logger
    src = """
    import torch
    class Logger:
        def log(self, it: int, action_std: torch.Tensor):
            self.writer.add_scalar("Policy/mean_std", action_std.mean().item(), it)
    class Runner:
        def __init__(self):
            self.logger = Logger()
        def learn(self, iterations: int):
            for it in range(iterations):
                for _ in range(self.num_steps):
                    self.obs, rew, done, info = self.env.step(self.policy(self.obs))
                self.logger.log(it, self.policy.std)
    """
    assert conf(src) == [(5, "PK101", "high")]


def test_an_empty_tensor_made_on_the_device_copies_nothing():
    src = """
    import torch
    class Env:
        def step(self, actions: torch.Tensor):
            acc = torch.tensor([], device=self.device)
            gains = torch.tensor([1.0, 2.0], device=self.device)
            return acc, gains
    """
    assert lint(src) == [(6, "PK109")]


# -- error paths -----------------------------------------------------------------------------------------------

def test_a_raise_or_an_assert_message_runs_only_when_it_fails():
    src = """
    import torch
    class Env:
        def step(self, actions: torch.Tensor):
            assert actions.ndim == 2, f"bad actions {actions}"
            if actions.shape[1] != self.n:
                raise ValueError(f"expected {self.n} actions, got {actions.sum().item()}")
            assert torch.isfinite(actions).all()
    """
    assert lint(src) == [(8, "PK103")]


def test_isinstance_with_a_union_of_host_types_narrows_to_host_data():
    src = """
    import numbers
    import numpy as np
    import torch
    class Env:
        def step(self, x: torch.Tensor):
            if isinstance(x, np.number | np.bool_ | numbers.Number):
                return float(x)
            if isinstance(x, (np.number, numbers.Number)):
                return int(x)
            return float(x)
    """
    assert lint(src) == [(11, "PK104")]


def test_a_direct_workflow_envs_parts_and_a_per_step_callback_are_hot_by_name():
    # the base class that calls them (Isaac Lab's DirectRLEnv.step, SB3's BaseCallback.on_step) is not linted
    src = """
    import torch
    class CartpoleEnv(DirectRLEnv):
        def _get_rewards(self) -> torch.Tensor:
            total = torch.zeros((self.num_envs,), device=self.device)
            return total + self.pole_vel.abs()
        def _get_dones(self):
            died = self.pole_pos.abs() > 3.0
            return died, torch.zeros_like(died)
    class RewardLogger(BaseCallback):
        def _on_step(self) -> bool:
            self.logger.record("reward", self.locals["rewards"].mean().item())
            return True
    """
    assert lint(src) == [(5, "PK201"), (9, "PK202"), (12, "PK101")]


# -- legged_gym-style envs (a fresh codebase read after the held-out round) ------------------------------------

def test_bases_in_a_namespace_package_and_a_dict_of_buffers_are_typed(tmp_path):
    # envs/base/ has no __init__.py (PEP 420): the absolute import still finds BaseTask's buffers; a dict
    # comprehension of device tensors holds tensors
    files = {
        "lgym/__init__.py": "",
        "lgym/envs/__init__.py": "",
        "lgym/envs/base/base_task.py": """
            import torch
            class BaseTask:
                def __init__(self, n, device):
                    self.episode_length_buf = torch.zeros(n, device=device, dtype=torch.long)
            """,
        "lgym/envs/base/legged_robot.py": """
            import torch
            from lgym.envs.base.base_task import BaseTask
            class LeggedRobot(BaseTask):
                def __init__(self, n, device, names):
                    super().__init__(n, device)
                    self.episode_sums = {k: torch.zeros(n, device=device) for k in names}
                def reset_idx(self, env_ids):
                    self.episode_length_buf[env_ids] = 0
                    for key in self.episode_sums.keys():
                        self.episode_sums[key][env_ids] = 0.
            """,
    }
    assert lint_tree(tmp_path, files) == [("legged_robot.py", 9, "PK113"), ("legged_robot.py", 11, "PK113")]


def test_a_parameter_every_hot_call_leaves_at_its_none_default_is_no_truth_test():
    src = """
    import torch
    class Robot:
        def step(self, actions: torch.Tensor):
            self.heights = self._get_heights()
        def _get_heights(self, env_ids=None):
            if env_ids:
                return self.points[env_ids]
            return self.points
    """
    assert lint(src) == []


def test_a_subclass_read_while_its_base_is_being_typed_keeps_no_partial_table():
    # IsaacGymEnvs: typing VecTask's methods reached (through call-site parameter hints) a task's method while
    # VecTask's own attribute table was unfinished; the task's table, cached without progress_buf, hid every
    # `self.progress_buf[env_ids] = 0` of every task
    import ast

    from perfkit.lint.infer import TENSOR, class_attrs, typer_for
    from perfkit.lint.modinfo import ModuleInfo
    from perfkit.lint.project import Project

    base_src = textwrap.dedent("""
        import torch
        class VecTask:
            def __init__(self, n, device):
                self.progress_buf = torch.zeros(n, device=device, dtype=torch.long)
        """)
    ant_src = textwrap.dedent("""
        from base import VecTask
        class Ant(VecTask):
            def reset_idx(self, env_ids):
                self.progress_buf[env_ids] = 0
        """)
    base = ModuleInfo(ast.parse(base_src), base_src, "base.py")
    ant = ModuleInfo(ast.parse(ant_src), ant_src, "ant.py")
    Project([base, ant])
    vec_task, ant_cls = base.classes["VecTask"], ant.classes["Ant"]
    reset_idx = ant_cls.methods["reset_idx"]
    vec_task.building = True  # as while VecTask's methods are being typed
    assert "progress_buf" not in class_attrs(ant, ant_cls) and ant_cls.attrs is None
    typer_for(ant, reset_idx)
    assert reset_idx not in ant.__dict__.get("_typers", {})
    vec_task.building = False
    assert class_attrs(ant, ant_cls)["progress_buf"] == TENSOR
    target = reset_idx.node.body[0].targets[0].value
    assert typer_for(ant, reset_idx).kind(target) == TENSOR


def test_public_pre_and_post_physics_steps_are_hot_by_name():
    # OmniIsaacGymEnvs / IsaacGymEnvs tasks: the vec env wrapper calls self._task.pre_physics_step(actions) on
    # a task object of unknown class, one of many tasks
    src = """
    import torch
    class CartpoleTask(RLTask):
        def pre_physics_step(self, actions) -> None:
            reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
            if len(reset_env_ids) > 0:
                self.reset_idx(reset_env_ids)
        def post_physics_step(self):
            self.progress_buf[:] += 1
            self.calculate_metrics()
        def calculate_metrics(self) -> None:
            self.rew_buf[:] = torch.where(self.fallen.bool(), -1.0, self.rew_buf).sum().item()
    """
    assert lint(src) == [(5, "PK106"), (12, "PK101")]


def test_a_block_behind_a_flag_every_hot_call_leaves_false_is_cold_in_an_and_too():
    # per-iteration logging reaches a helper whose waiting branch only drain() (after training) asks for
    src = """
    import torch
    class Metrics:
        def _collect(self, wait_oldest=False):
            if wait_oldest and self.pending:
                self.event.synchronize()
            return self.ready
        def log_iteration(self, x: torch.Tensor):
            return self._collect()
    class Runner:
        def __init__(self):
            self.metrics = Metrics()
        def learn(self, iterations: int):
            for it in range(iterations):
                for _ in range(24):
                    self.obs, rew, done, info = self.env.step(self.policy(self.obs))
                self.metrics.log_iteration(rew)
    """
    assert lint(src) == []


def test_a_vector_envs_step_async_and_step_wait_are_hot_but_not_proven():
    src = """
    import torch
    class VecPyTorch(VecEnvWrapper):
        def step_async(self, actions):
            actions = actions.cpu().numpy()
            self.venv.step_async(actions)
        def step_wait(self):
            obs, reward, done, info = self.venv.step_wait()
            obs = torch.from_numpy(obs).float().to(self.device)
            self.last = self.policy_state.item()
            return obs, reward, done, info
    """
    assert conf(src) == [(5, "PK102", "high"), (9, "PK109", "high"), (10, "PK101", "medium")]


def test_a_local_lambda_without_parameters_makes_what_its_body_makes():
    src = """
    import torch
    class AnymalTerrain:
        def __init__(self, n, device):
            torch_zeros = lambda: torch.zeros(n, dtype=torch.float, device=device, requires_grad=False)
            self.episode_sums = {"lin_vel_xy": torch_zeros(), "torques": torch_zeros()}
        def reset_idx(self, env_ids):
            for key in self.episode_sums.keys():
                self.episode_sums[key][env_ids] = 0.
    """
    assert lint(src) == [(9, "PK113")]
