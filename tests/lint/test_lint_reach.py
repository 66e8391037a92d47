"""The error classes of the third blind sample (`benchmarks/lint_fresh/`: sb3-contrib, d3rlpy, agilerl), one small
project each: host values out of gym-style `env.step()`, a tensor truth test that may be a None / flag check,
`isinstance`-narrowed branches, and hot paths reached through an agent's / buffer's methods. Each positive case
fails on the linter before these fixes (the `lint-improve` branch point), and each has its negative twin."""

from __future__ import annotations

from tests.lint.helpers import lint_project
from tests.lint.test_lint_real_causes import lint_tree


def findings(tmp_path, files: dict, **options):
    """(file, line, rule, confidence) of the project ``files``."""
    return sorted((v.path.rsplit("/", 1)[-1], v.line, v.rule, v.confidence) for v in lint_project(tmp_path, files, **options))


# -- host values out of gym-style env.step() ------------------------------------------------------------------

_TYPES = """
from typing import Any, Union
import gym
import gymnasium
GymEnv = Union[gym.Env[Any, Any], gymnasium.Env[Any, Any]]
"""

_FIT_ONLINE = """
import torch
from .types import {ann}

class Algo:
    def fit_online(self, env: {ann}, n_steps: int):
        obs, _ = env.reset()
        for step in range(n_steps):
            action = self.predict(obs)
            obs, reward, terminal, truncated, _ = env.step(action)
            clip_episode = terminal or truncated
            if clip_episode:
                obs, _ = env.reset()
"""


def test_step_flags_of_an_env_annotated_with_a_gym_type_alias_are_host_values(tmp_path):
    # d3rlpy: `env: GymEnv` (GymEnv = Union[gym.Env, gymnasium.Env] in another module of the package): its step's
    # terminal/truncated are Python bools / numpy, `terminal or truncated` reads no tensor
    files = {"pkg/__init__.py": "", "pkg/types.py": _TYPES, "pkg/algo.py": _FIT_ONLINE.format(ann="GymEnv")}
    assert lint_tree(tmp_path, files) == []


def test_step_flags_of_a_torch_vector_env_are_still_device_masks(tmp_path):
    # the same loop over an env of a torch module with no gym type in sight: a batched torch env's masks
    files = {"pkg/__init__.py": "", "pkg/types.py": "import torch\nclass IsaacEnv:\n    pass\n",
             "pkg/algo.py": _FIT_ONLINE.format(ann="IsaacEnv")}
    assert ("algo.py", 11, "PK103") in lint_tree(tmp_path, files)


# -- a truth test that may be a None / flag check -----------------------------------------------------------

def test_truth_test_of_an_optional_tensor_field_is_medium_not_high(tmp_path):
    src = """
    from typing import NamedTuple, Optional
    import torch

    class ActionOutput(NamedTuple):
        mu: torch.Tensor
        logstd: Optional[torch.Tensor]

        def step(self, src):
            if self.logstd:
                self.logstd.copy_(src.logstd)
            if self.mu:
                self.mu.copy_(src.mu)
    """
    # `if self.logstd:` means `is not None` (a tensor there would raise unless it has one element); `self.mu` is
    # only ever a tensor: a real truth value
    assert findings(tmp_path, {"t.py": src}) == [("t.py", 10, "PK103", "medium"), ("t.py", 12, "PK103", "high")]


def test_truth_test_of_an_attribute_also_set_to_none_or_a_parameter_defaulting_to_none_is_medium(tmp_path):
    src = """
    import torch

    class Env:
        def __init__(self, n, track):
            self.bonus = torch.zeros(n, device="cuda") if track else None
            self.hits = torch.zeros(n, device="cuda")

        def step(self, actions: torch.Tensor, noise: torch.Tensor = None):
            if self.bonus:
                self.bonus += 1
            if noise:
                actions = actions + noise
            if self.hits:
                self.hits += 1
    """
    assert findings(tmp_path, {"t.py": src}) == [
        ("t.py", 10, "PK103", "medium"), ("t.py", 12, "PK103", "medium"), ("t.py", 14, "PK103", "high")]


# -- isinstance-narrowed branches ----------------------------------------------------------------------------

def test_isinstance_narrowing_holds_for_the_value_from_before_a_rebinding_in_the_branch(tmp_path):
    # mani-skill's to_tensor: the final else is reached by non-tensors only, even when one path rebinds the name
    src = """
    import numpy as np
    import torch
    from typing import Sequence, Union

    def step(array: Union[torch.Tensor, np.ndarray, Sequence], device):
        if isinstance(array, torch.Tensor):
            ret = array.to(device)
        elif isinstance(array, np.ndarray):
            ret = torch.tensor(array).to(device)
        else:
            if isinstance(array, list) and isinstance(array[0], np.ndarray):
                array = np.array(array)
            ret = torch.tensor(array, device=device)
        return ret
    """
    got = findings(tmp_path, {"t.py": src})
    assert ("t.py", 14, "PK109", "high") in got  # host data copied to the device, whichever path reached it


_CONVERTER = """
import numpy as np
import torch

MaskInput = np.ndarray | torch.Tensor | None

def numpy_mask(value: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)

class Agent:
    def get_action(self, obs, action_mask: MaskInput = None):
        values = self.actor(obs)
        if action_mask is not None:
            values = values * torch.as_tensor(numpy_mask(action_mask), device=values.device)
        return values

def rollout(agent: Agent, env: {env}, n: int):
    obs, info = env.reset()
    for _ in range(n):
        action = agent.get_action(obs, action_mask={mask})
        obs, reward, done, trunc, info = env.step(action)
"""


def test_a_converter_called_with_the_host_mask_of_a_gym_env_info_does_not_sync(tmp_path):
    # agilerl: numpy_action_mask(action_mask) reads `.cpu()` only for a tensor; every hot call of get_action passes
    # the gym env's info["action_mask"] (numpy), so the declared `np.ndarray | torch.Tensor | None` is host here
    src = "import gymnasium as gym\n" + _CONVERTER.format(env="gym.Env", mask='info.get("action_mask")')
    assert [f for f in findings(tmp_path, {"t.py": src}) if f[2] == "PK102" and f[1] == 17] == []


def test_a_converter_called_with_a_device_mask_syncs(tmp_path):
    src = "import gymnasium as gym\n" + _CONVERTER.format(env="gym.Env", mask="torch.ones(4, device='cuda') > 0")
    assert ("t.py", 17, "PK102", "high") in findings(tmp_path, {"t.py": src})


def test_as_tensor_of_a_parameter_declared_either_host_or_tensor_is_a_copy(tmp_path):
    # sb3-contrib's apply_masking(masks: MaybeMasks): one caller passes a tensor, the rollout passes numpy
    src = """
    import numpy as np
    import torch as th

    class Dist:
        def apply_masking(self, masks: th.Tensor | np.ndarray | None, logits: th.Tensor):
            self.masks = th.as_tensor(masks, dtype=th.bool, device=logits.device)

        def apply_device_masking(self, masks: th.Tensor, logits: th.Tensor):
            self.masks = th.as_tensor(masks, dtype=th.bool, device=logits.device)

        def step(self, logits: th.Tensor, masks: np.ndarray):
            self.apply_masking(masks, logits)
            self.apply_masking(logits > 0, logits)
            self.apply_device_masking(logits > 0, logits)
    """
    got = [(line, rule) for _, line, rule, _ in findings(tmp_path, {"t.py": src})]
    assert (7, "PK109") in got and (10, "PK109") not in got


# -- hot paths reached through an agent's / a buffer's methods -----------------------------------------------

_ALGOS = {
    "pkg/__init__.py": "",
    "pkg/algos.py": """
        import torch

        class PPO:
            def get_action(self, obs):
                action = self._act(obs)
                return action.cpu().numpy()
        """ + "".join(f"""
        class Algo{i}:
            def get_action(self, obs):
                action = self._act(obs)
                return action.cpu().numpy()
        """ for i in range(5)),
}


def test_a_receiver_annotated_with_a_type_alias_of_a_project_class_is_resolved(tmp_path):
    files = dict(_ALGOS)
    files["pkg/rollouts.py"] = """
        import torch
        from .algos import PPO

        SupportedOnPolicy = PPO

        def collect(agent: SupportedOnPolicy, env, n: int):
            obs = env.reset()
            for _ in range(n):
                action = agent.get_action(obs)
                obs = env.step(action)
        """
    got = lint_tree(tmp_path, files)
    assert ("algos.py", 7, "PK102") in got and ("algos.py", 12, "PK102") not in got


def test_an_agent_receiver_runs_every_project_method_of_that_name(tmp_path):
    # `for agent in population.agents: ... agent.get_action(obs)`: six classes define get_action; each may run
    files = dict(_ALGOS)
    files["pkg/train.py"] = """
        import torch

        def train(population, env, n: int, helper):
            for agent in population.agents:
                obs = env.reset()
                for _ in range(n):
                    action = agent.get_action(obs)
                    obs = env.step(action)
        """
    got = lint_tree(tmp_path, files)
    assert [f for f in got if f[2] == "PK102"] == [("algos.py", 7 + 5 * i, "PK102") for i in range(6)]


def test_a_helper_receiver_does_not_stand_for_six_classes(tmp_path):
    files = dict(_ALGOS)
    files["pkg/train.py"] = """
        import torch

        def train(helper, env, n: int):
            obs = env.reset()
            for _ in range(n):
                action = helper.get_action(obs)
                obs = env.step(action)
        """
    assert [f for f in lint_tree(tmp_path, files) if f[2] == "PK102"] == []


def test_a_receiver_annotated_with_an_external_base_runs_the_project_subclasses_methods(tmp_path):
    # sb3-contrib: collect_rollouts(..., rollout_buffer: RolloutBuffer) calls rollout_buffer.add(...) every step;
    # RolloutBuffer is stable-baselines3's, RecurrentRolloutBuffer(RolloutBuffer) is the project's
    files = {
        "pkg/__init__.py": "",
        "pkg/buffers.py": """
            import numpy as np
            import torch as th
            from stable_baselines3.common.buffers import RolloutBuffer

            class RecurrentRolloutBuffer(RolloutBuffer):
                def add(self, *args, lstm_states, **kwargs):
                    self.hidden[self.pos] = np.array(lstm_states.pi[0].cpu().numpy())

            class Unrelated:
                def add(self, lstm_states):
                    self.hidden = lstm_states.cpu().numpy()
            """,
        "pkg/ppo.py": """
            import torch
            from stable_baselines3.common.buffers import RolloutBuffer

            class RecurrentPPO:
                def collect_rollouts(self, env, rollout_buffer: RolloutBuffer, n: int):
                    for _ in range(n):
                        actions, states = self.policy.forward(self._last_obs)
                        new_obs, rewards, dones, infos = env.step(actions)
                        rollout_buffer.add(self._last_obs, actions, lstm_states=states)
            """,
    }
    got = lint_tree(tmp_path, files)
    assert ("buffers.py", 8, "PK102") in got and ("buffers.py", 12, "PK102") not in got


def test_a_loop_around_a_rollout_collector_makes_what_it_calls_per_iteration(tmp_path):
    # agilerl: `collect = collect_rollouts` (or the recurrent one), then per iteration `collect(agent, env)` and
    # `agent.learn()`: the collector's tail (after its step loop) and the learner run once per rollout
    files = {
        "pkg/__init__.py": "",
        "pkg/rollouts.py": """
            import torch

            def _collect(agent, env, n, recurrent):
                obs = env.reset()
                for _ in range(n):
                    obs = env.step(agent.act(obs))
                last_value = agent.value(obs)
                return last_value.cpu().numpy()

            def collect_rollouts(agent, env, n):
                return _collect(agent, env, n, recurrent=False)

            def collect_rollouts_recurrent(agent, env, n):
                return _collect(agent, env, n, recurrent=True)
            """,
        "pkg/ppo.py": """
            import torch

            class PPO:
                def learn(self):
                    loss = self._loss()
                    return loss.item()
            """,
        "pkg/train.py": """
            import torch
            from .rollouts import collect_rollouts, collect_rollouts_recurrent

            def train(agent, env, iterations, recurrent):
                collect = collect_rollouts_recurrent if recurrent else collect_rollouts
                for it in range(iterations):
                    collect(agent, env, 128)
                    loss = agent.learn()
                    if it % 10 == 0:
                        print(torch.tensor(loss).item())
            """,
    }
    got = lint_tree(tmp_path, files)
    assert ("rollouts.py", 9, "PK102") in got and ("ppo.py", 7, "PK101") in got
    assert not [f for f in got if f[0] == "train.py"]  # the loop's own every-10-iterations print is left alone


def test_a_whole_training_run_called_in_a_loop_is_no_collector(tmp_path):
    # `for seed in seeds: train(seed)`: train() holds an iteration loop around its step loop and a gradient step;
    # its set-up (before the loops) is not made per-iteration
    files = {
        "pkg/__init__.py": "",
        "pkg/run.py": """
            import torch

            def train(env, seed):
                buf = torch.zeros(4096, device="cuda")
                print(buf.sum().item())
                for it in range(100):
                    for t in range(16):
                        env.step(buf)
                    loss = buf.mean()
                    loss.backward()

            def main(env, seeds):
                for seed in seeds:
                    train(env, seed)
            """,
    }
    assert [f for f in lint_tree(tmp_path, files) if f[1] in (5, 6)] == []


def test_a_tensor_branch_on_a_value_known_to_be_numpy_is_dead():
    from tests.lint.test_lint_real_causes import lint

    src = """
    import numpy as np
    import torch
    class Env:
        def step(self, actions: torch.Tensor, seq_length: int):
            x = np.zeros(3)
            if isinstance(x, torch.Tensor):
                x = x.cpu()
            if isinstance(actions, torch.Tensor):
                actions = actions.cpu()
            if isinstance(seq_length, torch.Tensor):
                seq_length = seq_length.cpu()
            return x, actions, seq_length
    """
    # only an annotation says `seq_length` is an int (torchrl checks it for a tensor): that branch stays live
    assert lint(src) == [(10, "PK102"), (12, "PK102")]


_GYM_WRAPPER = """
import gymnasium as gym
import torch

class Wrapper:
    def __init__(self, name):
        self._env = gym.make(name)

    def step(self, actions):
        obs, rew, terminated, truncated, infos = self._env.step(actions)
        return infos["success"].cpu()
"""


def test_info_of_a_gym_env_is_host_data(tmp_path):
    assert [f for f in findings(tmp_path, {"pkg/__init__.py": "", "pkg/wrap.py": _GYM_WRAPPER})
            if f[2] == "PK102"] == []


def test_info_of_a_gym_env_is_unknown_in_a_project_whose_gym_envs_step_on_torch(tmp_path):
    # ManiSkill: its gym.Env subclasses return torch tensors, so gym.make(...)'s info may hold device tensors
    env = """
    import gymnasium as gym
    import torch

    class GPUEnv(gym.Env):
        def step(self, action):
            obs = torch.zeros(4, 3, device="cuda")
            return obs, obs.sum(-1), obs[:, 0] > 0, obs[:, 1] > 0, {}
    """
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/wrap.py": _GYM_WRAPPER, "pkg/env.py": env})
    assert ("wrap.py", 11, "PK102", "high") in got


def test_tuple_unpacking_reads_the_items_of_an_annotated_tuple_return(tmp_path):
    # agilerl: `_, _, _, last_value, _ = agent._get_action_and_values(obs)` with `-> tuple[torch.Tensor, ...]`
    src = """
    import numpy as np
    import torch

    class Policy:
        def _values(self, obs) -> tuple[torch.Tensor, torch.Tensor]:
            return self.net(obs)

        def _host_values(self, obs) -> tuple[np.ndarray, np.ndarray]:
            return self.table[obs]

        def act(self, obs):
            action, value = self._values(obs)
            h_action, h_value = self._host_values(obs)
            return value.cpu(), h_value.tolist()
    """
    assert findings(tmp_path, {"t.py": src}) == [("t.py", 15, "PK102", "high")]


def test_a_loop_over_episodes_calling_a_collector_without_learning_is_no_iteration_loop(tmp_path):
    # mani-skill's motion-planning demos: `for seed in seeds: solve(env, seed)`, solve() steps the env through a
    # planner and learns nothing: its `if res == -1:` checks are not per-iteration code
    files = {
        "pkg/__init__.py": "",
        "pkg/plan.py": """
            import torch

            def follow_path(env, path):
                for q in path:
                    obs = env.step(q)
                return obs

            def solve(env, path):
                res = follow_path(env, path)
                if res == -1:
                    return res
                return follow_path(env, path)

            def main(env, paths):
                for path in paths:
                    res = solve(env, path)
            """,
    }
    assert [f for f in lint_tree(tmp_path, files) if f[1] == 11] == []


def test_a_return_annotated_tensor_or_host_is_not_a_tensor(tmp_path):
    # sample-factory's make_dones(...) -> DonesType (bool | np.ndarray | Tensor | Sequence), called by a gym wrapper;
    # a tensor-or-slice (mjlab's _resolve_env_ids) is a tensor: a slice is an index, not host data
    files = {
        "pkg/__init__.py": "",
        "pkg/utils.py": """
            from typing import Sequence, Union
            import numpy as np
            from torch import Tensor

            DonesType = Union[bool, np.ndarray, Tensor, Sequence]

            def make_dones(terminated: DonesType, truncated: DonesType) -> DonesType:
                return terminated | truncated

            def device_dones(terminated: Tensor, truncated: Tensor) -> Tensor | slice:
                return terminated | truncated
            """,
        "pkg/wrap.py": """
            import torch
            from .utils import device_dones, make_dones

            class StatsWrapper:
                def step(self, action):
                    obs, reward, terminated, truncated, info = self.env.step(action)
                    done = make_dones(terminated, truncated)
                    if self.timestep % 20 == 0 or done:
                        self.log(info)
                    if device_dones(terminated, truncated):
                        self.log(info)
                    return obs
            """,
    }
    got = [(f, line, rule) for f, line, rule, conf in findings(tmp_path, files) if conf == "high"]
    assert ("wrap.py", 9, "PK103") not in got and ("wrap.py", 11, "PK103") in got


def test_step_results_the_code_always_reads_with_numpy_are_host_data():
    # rl-games' RayWorker.step: `if np.isscalar(is_done):` on an env of unknown type: a gym env's flag
    from tests.lint.test_lint_real_causes import lint

    src = """
    import numpy as np
    import torch

    class RayWorker:
        def step(self, action):
            next_state, reward, is_done, info = self.env.step(action)
            if np.isscalar(is_done):
                episode_done = is_done
            else:
                episode_done = is_done.all()
            if episode_done:
                next_state = self.reset()
            return next_state

    class Player:
        def step(self, env, actions):
            obs, rewards, dones, infos = env.step(actions)
            if self.is_tensor_obses:
                return obs, rewards.cpu(), dones
            return obs, torch.from_numpy(np.asarray(rewards)), dones
    """
    # the player reads rewards with numpy only on its host-env branch: on the other, a device tensor
    assert lint(src) == [(20, "PK102")]


def test_bounds_of_a_gym_space_are_numpy():
    # skrl: torch.split(net_output, self.action_space.nvec.tolist()): a MultiDiscrete space's nvec is numpy
    from tests.lint.test_lint_real_causes import lint

    src = """
    import torch
    class Model:
        def act(self, net_output: torch.Tensor):
            parts = torch.split(net_output, self.action_space.nvec.tolist(), dim=-1)
            sizes = self.action_sizes.tolist()
            return parts, sizes
    """
    assert lint(src) == [(6, "PK102")]  # an attribute of unknown type: still a possible tensor
