"""The error classes of the fourth blind sample (`benchmarks/lint_blind4/`: autonomous-learning-library, mushroom-rl,
machin): an RL library's algorithm classes whose per-update / per-action methods no loop of the library calls (the
user's script does), modules that get torch through `from .base import *`, and a library loop that steps its env
through a helper (`self._step()`). One small project each; every positive case fails on the linter before these
fixes (the `lint-reach2` branch point), and each has its negative twin."""

from __future__ import annotations

from tests.lint.test_lint_reach import findings

# -- `from .x import *` of a project module ------------------------------------------------------------------

_BASE = """
    import torch as t
    import torch.nn as nn

    class Base:
        def __init__(self, net: nn.Module):
            self.net = net
            self.optim = t.optim.Adam(net.parameters())
    """

_STAR = """
    from .base import *

    class Algo(Base):
        def update(self, batch):
            loss = self.net(batch).mean()
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
            if t.allclose(loss, t.zeros_like(loss)):
                pass
            return loss.item()
    """


def test_a_star_import_of_a_project_module_brings_its_torch_alias(tmp_path):
    # machin: `from .dqn import *` is how dqn_per / rainbow / ppo / td3 / trpo get `t` (torch) and `nn`
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": _BASE, "pkg/algo.py": _STAR})
    assert ("algo.py", 12, "PK101", "high") in got  # loss.item() in a learner's update
    assert ("algo.py", 10, "PK202", "high") in got  # t.zeros_like: t is torch


def test_a_star_import_honours_all_and_the_importers_own_names(tmp_path):
    base = _BASE + "\n    __all__ = ['Base']\n"
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": base, "pkg/algo.py": _STAR})
    assert not [f for f in got if f[0] == "algo.py"]  # `t` is not exported: not torch, the module uses no torch
    own = _STAR.replace("from .base import *", "from .base import *\n    import numpy as t")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": _BASE, "pkg/algo.py": own})
    assert not [f for f in got if f[0] == "algo.py" and f[2] == "PK202"]  # its own `t` is numpy


# -- a library loop that steps its env through a helper --------------------------------------------------------

_CORE = """
    import torch

    class Core:
        def __init__(self, agent, mdp):
            self.agent = agent
            self.mdp = mdp

        def learn(self, n_steps, n_steps_per_fit):
            dataset = []
            while len(dataset) < n_steps:
                dataset.append(self.{helper}())
                if len(dataset) % n_steps_per_fit == 0:
                    self.agent.fit(dataset)

        def _step(self):
            action = self.agent.draw_action(self._state)
            next_state, reward, absorbing, info = self.mdp.step(action)
            return next_state

        def _record(self):
            return self._state
    """

_AGENT = """
    import torch

    class DQN:
        def fit(self, dataset):
            loss = self.approximator(dataset).mean()
            self.losses.append(loss.item())
    """


def test_a_loop_calling_a_function_that_steps_the_env_once_is_a_rollout_loop(tmp_path):
    # mushroom-rl: Core._run_impl's `while move_condition(): sample = self._step(render); ...; self.agent.fit(dataset)`
    files = {"pkg/__init__.py": "", "pkg/core.py": _CORE.format(helper="_step"), "pkg/dqn.py": _AGENT}
    assert ("dqn.py", 7, "PK101", "high") in findings(tmp_path, files)


def test_a_loop_calling_a_helper_that_does_not_step_is_no_rollout_loop(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/core.py": _CORE.format(helper="_record"), "pkg/dqn.py": _AGENT}
    assert not [f for f in findings(tmp_path, files) if f[0] == "dqn.py"]


# -- an RL algorithm's per-step entry points, called by the user's script ---------------------------------------

_A2C = """
    import torch

    class A2C:
        def __init__(self, actor, critic):
            self.actor, self.critic = actor, critic
            self.optim = torch.optim.Adam(actor.parameters())

        def store_episode(self, episode):
            for trans in episode:
                trans["value"] = self._criticize(trans["state"]).item()

        def _criticize(self, state):
            return self.critic(state)

        def {update}(self, batch):
            loss = self.actor(batch).mean()
            {backward}
    """


_STEP = "loss.backward()\n            self.optim.step()"


def test_store_episode_of_a_class_that_makes_gradient_steps_is_hot(tmp_path):
    # machin's A2C.store_episode: the user calls it every episode; the critic's `.item()` per transition (high: a
    # learning agent's per-step entry is a proven per-step path, see tests/lint/test_lint_transfer.py)
    files = {"pkg/__init__.py": "", "pkg/a2c.py": _A2C.format(update="update", backward=_STEP)}
    assert ("a2c.py", 11, "PK101", "high") in findings(tmp_path, files)


def test_store_episode_of_a_subclass_of_a_learning_base_is_hot(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/a2c.py": _A2C.format(update="update", backward=_STEP),
             "pkg/ppo.py": """
                 import torch
                 from .a2c import A2C

                 class PPO(A2C):
                     def store_episode(self, episode):
                         self.last = episode[-1]["value"].cpu()
                 """}
    assert ("ppo.py", 7, "PK102", "high") in findings(tmp_path, files)


def test_store_episode_of_a_class_that_never_learns_is_not_hot(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/a2c.py": _A2C.format(update="report", backward="return loss")}
    assert not [f for f in findings(tmp_path, files) if f[2] == "PK101"]


_APPROX = """
    import torch

    class TorchApproximator:
        def _fit_batch(self, batch):
            loss = self._loss(batch)
            {backward}
            return loss.item()
    """


def test_a_fit_method_that_makes_a_gradient_step_is_a_learner_update(tmp_path):
    # mushroom-rl's TorchApproximator._fit_batch: backward, optimizer step, `return loss.item()`
    files = {"pkg/__init__.py": "", "pkg/approx.py": _APPROX.format(
        backward="loss.backward()\n            self._optimizer.step()")}
    assert ("approx.py", 9, "PK101", "high") in findings(tmp_path, files)
    files["pkg/approx.py"] = _APPROX.format(backward="self.history.append(loss)")
    assert findings(tmp_path, files) == []


# -- type_as moves a host tensor to the other tensor's device ---------------------------------------------------

def test_type_as_of_a_host_tensor_lives_where_the_other_tensor_does():
    from tests.lint.helpers import in_step, rules_of
    # machin's RAINBOW: `t.linspace(...).type_as(q_dist)` is on the GPU when q_dist is
    assert "PK101" in rules_of(in_step("v = torch.linspace(0, 1, 5).type_as(a)\nv.sum().item()"))
    assert "PK101" not in rules_of(in_step("v = torch.linspace(0, 1, 5).type_as(torch.zeros(5))\nv.sum().item()"))


def test_observe_of_a_learning_agent_is_hot(tmp_path):
    # pfrl's agent.batch_observe(obs, reward, done, reset) / Pearl's observe: the user's loop calls it every step
    files = {"pkg/__init__.py": "", "pkg/a2c.py": _A2C.format(update="update", backward=_STEP).replace(
        "store_episode", "batch_observe")}
    assert ("a2c.py", 11, "PK101", "high") in findings(tmp_path, files)


# -- `.astype` is NumPy's ------------------------------------------------------------------------------------------

_TO_STATE = """
    import torch

    class VectorEnv:
        def __init__(self):
            self.obs_buf = torch.zeros(4, 3, device="cuda")

        def step(self, action):
            return self._to_state(self.obs_buf)

        def _to_state(self, obs):
            obs = obs{convert}
            return torch.tensor(obs, device=self._device)
    """


def test_a_value_converted_with_astype_is_a_numpy_array(tmp_path):
    # autonomous-learning-library's GymVectorEnvironment._to_state: `obs = obs.astype(dtype)` of a parameter named
    # (or passed) like a tensor; torch tensors have no astype, so torch.tensor(obs, device=d) copies host data
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": _TO_STATE.format(convert=".astype('float32')")})
    assert ("env.py", 13, "PK109", "high") in got
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": _TO_STATE.format(convert=".float()")})
    assert ("env.py", 13, "PK109", "high") not in got  # a device tensor made float: already on the device
