"""The error classes of the seventh blind sample (`benchmarks/lint_blind7/`: legged_gym, ElegantRL, pfrl): host values
of a CPU gym loop read as device tensors, and agents pinned to the CPU. One small project each; every positive case
fails on the linter before these fixes (main at 85a78e8), and each has its negative twin."""

from __future__ import annotations

from tests.lint.test_lint_reach import findings

# -- a Python done / reset flag from a gym-style step, tested whole ------------------------------------------------

_AGENT = """
    import torch

    class Agent:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt
            self.t = 0

        def update(self):
            loss = self.model(torch.zeros(3, device="cuda")).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

        def observe(self, obs, reward, done, reset):
            self._observe_train(obs, reward, done, reset)

        def _observe_train(self, obs, reward, done, reset):
            self.t += 1
            if self.t % 10 == 0 or done or reset:
                self.update()
            if done:
                self.t = 0
    """

_LOOP = """
    import torch

    def train(agent, env, steps):
        obs = env.reset()
        for t in range(steps):
            obs, r, done, info = env.step(agent.act(obs))
            reset = info.get("needs_reset", False)
            agent.observe(obs, r, done, reset)
            if done or reset:
                obs = env.reset()
    """


def test_a_whole_truth_test_of_a_flag_typed_by_its_name_alone_is_a_python_flag(tmp_path):
    # pfrl's agents: `observe(obs, reward, done, reset)` gets a gym env's Python bools; `if done or reset:` on a
    # batched device mask would raise, so a flag tested whole is a host value (before: PK103 high on each)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _AGENT, "pkg/loop.py": _LOOP})
    assert not [f for f in got if f[2] == "PK103"], got


def test_a_flag_proven_a_device_tensor_is_still_a_sync_when_tested_whole(tmp_path):
    # the negative twin: the same tests on masks a torch factory made on the device, and a guessed mask's `.any()`
    agent = _AGENT.replace("            self.t += 1\n",
                           "            self.t += 1\n            done = torch.zeros(1, dtype=torch.bool, device='cuda')\n")
    loop = _LOOP.replace("            if done or reset:", "            if done.any():")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": agent, "pkg/loop.py": loop})
    assert ("agent.py", 21, "PK103", "high") in got  # `... or done or reset:`: done is a device mask here
    assert ("agent.py", 23, "PK103", "high") in got  # `if done:`
    assert ("loop.py", 10, "PK103", "high") in got  # `done.any()` reads a mask whatever it holds


# -- an agent that pins its device to the CPU --------------------------------------------------------------------

_CPU_AGENT = """
    import logging
    import torch

    logger = logging.getLogger(__name__)

    class A3C:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt
            self.device = torch.device("cpu")

        def act(self, obs):
            state = torch.as_tensor(obs, device=self.device)
            pout, vout = self.model(state)
            action = pout.sample()
            value = float(vout)
            logger.debug("value %s", vout)
            return action.cpu().numpy()[0], value

        def update(self, batch):
            loss = self.model(torch.zeros(3, device=self.device)).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss.item()
    """


def test_the_tensors_of_an_agent_pinned_to_the_cpu_are_host_tensors(tmp_path):
    # pfrl's A3C / ACER: `self.device = torch.device("cpu")` (Hogwild on a shared CPU model); before: PK104 / PK105 /
    # PK101 high and PK102 medium on their model's outputs
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/a3c.py": _CPU_AGENT})
    assert not [f for f in got if f[2].startswith("PK1")], got


def test_an_agent_whose_device_is_also_set_elsewhere_keeps_its_device_tensors(tmp_path):
    # the negative twin: a subclass (or another branch) puts the same code on the GPU
    sub = _CPU_AGENT + """
    class GPUA3C(A3C):
        def __init__(self, model, opt):
            super().__init__(model, opt)
            self.device = torch.device("cuda")
    """
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/a3c.py": sub})
    assert ("a3c.py", 16, "PK104", "high") in got  # float(vout)
    assert ("a3c.py", 17, "PK105", "high") in got  # logger.debug of a tensor
    assert ("a3c.py", 18, "PK102", "high") in got  # action.cpu() on an agent entry: promoted
    assert ("a3c.py", 25, "PK101", "high") in got  # loss.item()


# an agent that makes gradient steps on the GPU: its explore_env (below) is a per-step path
_LEARNING_AGENT = """
    import torch

    class Agent:
        def __init__(self, act, opt):
            self.act, self.opt = act, opt
            self.device = torch.device("cuda")

        def update(self, batch):
            loss = self.act(batch).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
"""


# -- a host env's reward written at the step index of a device buffer ----------------------------------------------

_EXPLORE = _LEARNING_AGENT + """
        def explore_env(self, env, horizon_len, state):
            rewards = torch.zeros(horizon_len, dtype=torch.float32).to(self.device)
            dones = torch.zeros(horizon_len, dtype=torch.bool).to(self.device)
            for t in range(horizon_len):
                action, logprob = [t[0] for t in self.act(state)]
                ary_action = action.detach().cpu().numpy()
                ary_state, reward, done, truncate, _ = env.step(ary_action)
                state = torch.as_tensor(ary_state, device=self.device)
                rewards[t] = reward
                dones[t] = done
            return rewards, dones
    """


def test_a_host_envs_step_results_written_at_the_step_index_of_a_device_buffer(tmp_path):
    # ElegantRL's `_explore_one_env`: `rewards[t] = reward` copies the gym env's NumPy / Python value to the GPU, every
    # step; before: missed (the comprehension's own `t` was taken for the loop's, and NumPy values were not scalars)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _EXPLORE})
    assert ("agent.py", 23, "PK113", "high") in got, got
    assert ("agent.py", 24, "PK113", "high") in got, got


def test_a_device_value_written_at_the_step_index_is_no_scalar_copy(tmp_path):
    # the negative twin: the buffers take device tensors (the policy's outputs), and the index is the comprehension's
    src = _EXPLORE.replace("rewards[t] = reward", "rewards[t] = logprob").replace("dones[t] = done",
                                                                              "x = [dones[t] for t in state]")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": src})
    assert not [f for f in got if f[2] == "PK113"], got


# -- Isaac Gym's wrapped state tensors, and a tensor test that returns early -----------------------------------------

_ISAAC = """
    import torch
    from isaacgym import gymtorch

    class Robot:
        def __init__(self, gym, sim, n, d):
            self.gym, self.sim = gym, sim
            dof_state = gym.acquire_dof_state_tensor(sim)
            self.dof_state = gymtorch.wrap_tensor(dof_state)
            self.dof_vel = self.dof_state.view(n, d, 2)[..., 1]

        def step(self, actions):
            self.gym.simulate(self.sim)
            self.reset_idx(torch.arange(4, device="cuda"))

        def reset_idx(self, env_ids):
            self.dof_vel[env_ids] = 0.
    """


def test_isaac_gym_wrapped_state_tensors_are_device_tensors(tmp_path):
    # legged_gym's `self.dof_vel[env_ids] = 0.` on a view of `gymtorch.wrap_tensor(...)`; before: untyped, missed
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/robot.py": _ISAAC})
    assert ("robot.py", 17, "PK113", "high") in got, got
    plain = _ISAAC.replace("gymtorch.wrap_tensor(dof_state)", "dof_state")  # the twin: an opaque handle
    assert not [f for f in findings(tmp_path, {"pkg/__init__.py": "", "pkg/robot.py": plain}) if f[2] == "PK113"]


_EARLY = """
    from typing import Sequence
    import torch

    class Env:
        def step(self, counts: Sequence[int] | torch.Tensor):
            if isinstance(counts, torch.Tensor):
                {exit}
            return [int(c) for c in counts]
    """


def test_code_after_an_isinstance_test_that_returns_sees_the_other_type(tmp_path):
    # `if isinstance(x, torch.Tensor): return ...` then host code on x: before, PK104 high on `int(c)`
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": _EARLY.format(exit="return counts.tolist()")})
    assert not [f for f in got if f[1] == 9], got
    # the twin: a test that does not leave the block narrows nothing after it
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/env.py": _EARLY.format(exit="print('tensor')")})
    assert ("env.py", 9, "PK104", "high") in got, got


_RESET = _LEARNING_AGENT + """
        def explore_env(self, env, horizon_len, state):
            for t in range(horizon_len):
                action = self.act(state)
                ary_state, reward, done, truncate, _ = env.step({action})
                if done or truncate:
                    ary_state, info = env.reset()
                state = torch.as_tensor(ary_state, dtype=torch.float32, device=self.device)
            return state
    """


def test_the_reset_of_an_env_stepped_with_numpy_actions_is_numpy_too(tmp_path):
    # ElegantRL: `ary_state` comes from `env.step(ary_action)` or, after an episode ends, `env.reset()`; its upload
    # with `th.as_tensor(..., device=)` every step; before: missed (the reset of an unknown env was taken for a tensor)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _RESET.format(action="action.cpu().numpy()")})
    assert ("agent.py", 21, "PK109", "high") in got, got
    # the twin: an env stepped with the device tensor itself (a GPU env) resets to device tensors: no upload
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _RESET.format(action="action")})
    assert not [f for f in got if f[2] == "PK109"], got


# -- host tensors after an explicit copy to the host -----------------------------------------------------------------

_QMIX = """
    import torch

    class Learner:
        def __init__(self, net, opt):
            self.net, self.opt = net, opt
            self.priority_max = 1.0

        def train(self, batch):
            td = self.net(batch)
            loss = td.mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            info = {{}}
            info["td_errors_abs"] = td.detach(){move}
            self.priority_max = max(torch.max(info["td_errors_abs"]).item(), self.priority_max)
            return info
    """


def test_a_local_dict_key_holds_the_host_copy_written_there(tmp_path):
    # ElegantRL's QMix: `info["td_errors_abs"] = rewards.sum(1).detach().to("cpu")`, then `.item()` of its max: host
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/learner.py": _QMIX.format(move='.to("cpu")')})
    assert not [f for f in got if f[2] == "PK101"], got
    # the twin: the key holds the device tensor itself
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/learner.py": _QMIX.format(move="")})
    assert ("learner.py", 17, "PK101", "high") in got, got


_TREE = """
    import torch
    from torch import Tensor

    class SumTree:
        def __init__(self, n):
            self.tree = torch.zeros(2 * n)

        def update_ids(self, data_ids: Tensor, prob=10.0):
            self.tree[data_ids] = prob
            return (data_ids // 2).unique()

    class Buffer:
        def __init__(self, n):
            self.tree = SumTree(n)

        def add(self, ids):
            self.tree.update_ids({ids})
    """


def test_a_parameter_annotated_tensor_that_every_hot_call_copies_to_the_host_is_a_host_tensor(tmp_path):
    # ElegantRL's PER sum tree: `update_ids(data_ids: TEN)` called with `data_ids.cpu()`; before: PK106 high on
    # `.unique()` and PK113 on the index write of the host tree
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/buf.py": _TREE.format(ids="ids.cpu()")})
    assert got == [("buf.py", 18, "PK102", "high")], got  # only the caller's own `.cpu()`
    # the twin: callers that pass the (device) tensor as it is
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/buf.py": _TREE.format(ids="ids")})
    assert ("buf.py", 11, "PK106", "high") in got, got


# -- a 2-tuple iterated, and a line only the CPU branch reaches ------------------------------------------------------

_TWIN_Q = """
    import torch

    class QNetTwin(torch.nn.Module):
        def get_q1_q2(self, state):
            s = self.net_state(state)
            return self.net_val1(s), self.net_val2(s)

    class Agent:
        def __init__(self, act, opt):
            self.cri, self.opt = act, opt

        def update_net(self, state: torch.Tensor, action):
            q1, q2 = [qs.gather(1, action).squeeze(1) for qs in self.cri.get_q1_q2(state)]
            loss = (q1 + q2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
    """


def test_iterating_the_tuple_a_project_method_returns_is_no_loop_over_a_tensor(tmp_path):
    # ElegantRL's `for qs in self.cri.get_q1_q2(state)`: two Q tensors, not a tensor's rows; before: PK303 high
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _TWIN_Q})
    assert not [f for f in got if f[2] == "PK303"], got
    # the twin: a method that returns one tensor is iterated row by row
    one = _TWIN_Q.replace("return self.net_val1(s), self.net_val2(s)", "return self.net_val1(s)")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": one})
    assert ("agent.py", 14, "PK303", "high") in got, got


_CLIP = """
    import numpy as np
    import torch

    def clip_grad(parameters, max_norm):
        parameters = list(parameters)
        if parameters[0].is_cuda:
            return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        total = np.linalg.norm([np.linalg.norm(p.grad.detach().cpu().numpy()) for p in parameters])
        return total

    class Agent:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt

        def update(self, batch):
            loss = self.model(batch).mean()
            self.opt.zero_grad()
            loss.backward()
            clip_grad(self.model.parameters(), 1.0)
            self.opt.step()
    """


def test_a_line_only_the_cpu_branch_reaches_reads_host_tensors(tmp_path):
    # pfrl's `clip_l2_grad_norm_`: on CUDA parameters it returns through `clip_grad_norm_` first; before: PK102 high
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/clip.py": _CLIP})
    assert not [f for f in got if f[1] == 9], got
    # the twin: without the CUDA exit, the `.cpu()` of every gradient is a sync on the GPU too
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/clip.py": _CLIP.replace(".is_cuda:", ".is_cuda and False:")})
    assert [f for f in got if f[1] == 9 and f[2] == "PK102"], got
