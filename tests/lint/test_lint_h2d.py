"""The miss classes of the fifth blind sample (`benchmarks/lint_blind5/`: sheeprl, imitation, rllte-core), one small
project each: a set-up-named helper that uploads each step's observations (`prepare_obs`), a storage's `add` reached
through a typing-only subclass of an abstract base or a receiver of unknown class, an upload inside a lambda that
`__init__` binds and `step()` calls, and a GPU tensor written into a CPU tensor. Each positive case fails on the
linter before these fixes (the `lint-h2d` branch point), and each has its negative twin."""

from __future__ import annotations

from tests.lint.helpers import lint_project


def found(tmp_path, files: dict, **options):
    """(file, line, rule, confidence) of the project ``files``."""
    return sorted((v.path.rsplit("/", 1)[-1], v.line, v.rule, v.confidence)
                  for v in lint_project(tmp_path, files, **options))


# -- a set-up-named helper called every env step ------------------------------------------------------------------

_PREPARE = """
import numpy as np
import torch

def prepare_obs(fabric, obs, num_envs=1):
    torch_obs = {}
    for k in obs.keys():
        torch_obs[k] = torch.from_numpy(obs[k].copy()).to(fabric.device).float()
    return torch_obs
"""

_ROLLOUT = """
import torch
from .utils import prepare_obs

def main(fabric, envs, agent, cfg):
    obs = envs.reset()[0]
{body}
"""


def test_a_prepare_named_helper_called_in_the_rollout_loop_is_no_set_up(tmp_path):
    # sheeprl's prepare_obs(fabric, obs): `prepare` reads like set-up, but the rollout loop calls it every env step
    body = """    for step in range(cfg.num_steps):
        torch_obs = prepare_obs(fabric, obs)
        actions = agent(torch_obs)
        obs, rewards, terminated, truncated, info = envs.step(actions.cpu().numpy())"""
    files = {"pkg/__init__.py": "", "pkg/utils.py": _PREPARE, "pkg/train.py": _ROLLOUT.format(body=body)}
    assert ("utils.py", 8, "PK109", "high") in found(tmp_path, files)


def test_a_prepare_named_helper_called_once_before_the_loop_stays_set_up(tmp_path):
    body = """    torch_obs = prepare_obs(fabric, obs)
    for step in range(cfg.num_steps):
        actions = agent(torch_obs)
        obs, rewards, terminated, truncated, info = envs.step(actions.cpu().numpy())"""
    files = {"pkg/__init__.py": "", "pkg/utils.py": _PREPARE, "pkg/train.py": _ROLLOUT.format(body=body)}
    assert not [f for f in found(tmp_path, files) if f[0] == "utils.py"]


# -- a storage's add reached through a typing-only subclass of its abstract base ----------------------------------

_BASE = """
from abc import ABC, abstractmethod
import torch as th

class BaseStorage(ABC):
    def __init__(self, device):
        self.device = th.device(device)

    {add}
"""

_ABSTRACT_ADD = """@abstractmethod
    def add(self, *args) -> None:
        \"\"\"Add transitions.\"\"\""""

_CONCRETE_ADD = """def add(self, *args) -> None:
        self.n = len(args)"""

_VANILLA = """
import numpy as np
import torch as th
from .base import BaseStorage

class VanillaReplayStorage(BaseStorage):
    def add(self, observations: th.Tensor, actions: th.Tensor) -> None:
        np.copyto(self.observations[self.step], observations.cpu().numpy())
"""

_TYPES = """
from .base import BaseStorage

class ReplayStorageType(BaseStorage):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
"""

_AGENT = """
import torch as th
from .types import ReplayStorageType

class OffPolicyAgent:
    def __init__(self, env):
        self.env = env
        self.storage: ReplayStorageType

    def train(self, num_train_steps: int):
        obs, infos = self.env.reset()
        for _ in range(num_train_steps):
            actions = self.policy(obs)
            next_obs, rews, terms, truncs, infos = self.env.step(actions)
            self.storage.add(obs, actions)
            obs = next_obs
"""


def _storage_files(add: str) -> dict:
    return {"pkg/__init__.py": "", "pkg/base.py": _BASE.format(add=add), "pkg/vanilla.py": _VANILLA,
            "pkg/types.py": _TYPES, "pkg/agent.py": _AGENT}


def test_an_abstract_storage_method_runs_its_concrete_siblings(tmp_path):
    # rllte: `self.storage: ReplayStorageType` (a typing-only subclass of BaseStorage, whose `add` is abstract): the
    # rollout loop's `self.storage.add(...)` runs a concrete storage's add, whose `.cpu()` copies every env step
    assert ("vanilla.py", 8, "PK102", "high") in found(tmp_path, _storage_files(_ABSTRACT_ADD))


def test_a_concrete_inherited_method_is_not_widened_to_siblings(tmp_path):
    # the typed class inherits a real `add` from the base: that one runs, not a sibling subclass's (the sibling is
    # named unlike a storage here: a storage's own `add` is hot by itself, tests/lint/test_lint_transfer.py)
    files = _storage_files(_CONCRETE_ADD)
    files["pkg/vanilla.py"] = _VANILLA.replace("VanillaReplayStorage", "VanillaKeeper")
    assert not [f for f in found(tmp_path, files) if f[0] == "vanilla.py"]
    files["pkg/base.py"] = _BASE.format(add=_ABSTRACT_ADD)  # the twin: an abstract add runs the sibling's
    assert ("vanilla.py", 8, "PK102", "high") in found(tmp_path, files)


# -- a storage's add on a receiver whose class the code does not say ----------------------------------------------

_STORAGES = """
import numpy as np
import torch

class RolloutStorage:
    def insert(self, obs: torch.Tensor, rewards: torch.Tensor):
        self.rewards[self.step] = rewards.cpu().numpy()

class Registry:
    def insert(self, obs: torch.Tensor, rewards: torch.Tensor):
        self.last = rewards.cpu().numpy()
"""

_RUNNER = """
import torch

class Runner:
    def __init__(self, storage, registry):
        self.{attr} = storage

    def run(self, n: int):
        obs = self.env.reset()
        for _ in range(n):
            actions = self.actor(obs)
            obs, rewards, dones, infos = self.env.step(actions)
            self.{attr}.insert(obs, rewards)
"""


def test_a_storage_named_receiver_runs_the_storage_classes_method(tmp_path):
    # `self.storage` is set from a constructor argument: `insert` is too generic a name to resolve by itself, but on
    # a receiver named like a storage it runs a storage class's insert (not Registry's)
    files = {"pkg/__init__.py": "", "pkg/storages.py": _STORAGES, "pkg/runner.py": _RUNNER.format(attr="storage")}
    got = [f for f in found(tmp_path, files) if f[0] == "storages.py"]
    assert got == [("storages.py", 7, "PK102", "high")]


def test_a_receiver_not_named_like_a_storage_stays_unresolved(tmp_path):
    # `self.sink.insert(...)` runs no project class's insert (RolloutStorage's own `insert` is hot by itself, as a
    # storage's per-transition method: tests/lint/test_lint_transfer.py; Registry's is reached by nothing)
    files = {"pkg/__init__.py": "", "pkg/storages.py": _STORAGES, "pkg/runner.py": _RUNNER.format(attr="sink")}
    assert not [f for f in found(tmp_path, files) if f[0] == "storages.py" and f[1] == 11]
    files["pkg/storages.py"] = _STORAGES.replace("RolloutStorage", "RolloutKeeper")
    assert not [f for f in found(tmp_path, files) if f[0] == "storages.py"]


# -- an upload inside a lambda that __init__ binds -----------------------------------------------------------------

_WRAPPER = """
import torch as th

class Gymnasium2Torch:
    def __init__(self, env, device: str):
        self.env = env
        self.device = th.device(device)
        self._format_obs = lambda x: th.as_tensor(x, device=self.device)

    def reset(self, seed=None):
        obs, info = self.env.reset(seed=seed)
        return obs, info

    def step(self, actions: th.Tensor):
        obs, rewards, terms, truncs, infos = self.env.step(actions.cpu().numpy())
        return {obs}, rewards, terms, truncs, infos
"""


def test_a_lambda_bound_in_init_and_called_from_step_is_hot(tmp_path):
    # rllte's Gymnasium2Torch: the per-step observation upload sits in a lambda built in __init__
    src = _WRAPPER.format(obs="self._format_obs(obs)")
    got = found(tmp_path, {"w.py": src})
    assert ("w.py", 8, "PK109", "high") in got


def test_a_lambda_bound_in_init_and_called_from_no_hot_code_stays_set_up(tmp_path):
    src = _WRAPPER.format(obs="obs").replace("return obs, info", "return self._format_obs(obs), info") \
        .replace("def reset(self", "def restore(self")
    got = found(tmp_path, {"w.py": src})
    assert not [f for f in got if f[1] == 8]


# -- a GPU tensor written into a CPU tensor ------------------------------------------------------------------------

_PREFERENCE = """
import torch as th

class PreferenceModel(th.nn.Module):
    def probability(self, rews1: th.Tensor, rews2: th.Tensor) -> th.Tensor:
        return th.sigmoid(rews1.sum() - rews2.sum())

    def forward(self, pairs, host: bool):
        probs = th.empty(len(pairs), dtype=th.float32)
        for i, (f1, f2) in enumerate(pairs):
            if host:
                probs[i] = self.probability(th.from_numpy(f1.rews), th.from_numpy(f2.rews))
            else:
                probs[i] = self.probability(self.net(f1.obs), self.net(f2.obs))
        return probs
"""


def test_a_device_result_written_into_a_cpu_tensor_is_a_device_to_host_copy(tmp_path):
    # imitation: `probs = th.empty(n)` (CPU) filled per fragment pair with the reward net's device output
    got = found(tmp_path, {"m.py": _PREFERENCE})
    assert ("m.py", 14, "PK102", "high") in got
    assert not [f for f in got if f[1] == 12]  # the same write of a result computed from CPU tensors


_ADVANTAGES = """
import torch as t

class Impala:
    def update(self, state, ep_len: int):
        value = self.critic(state).to("cpu")
        delta_v = value * 0.5
        vs = t.zeros_like(value)
        for idx in reversed(range(ep_len - 1)):
            vs[idx] = value[idx] + delta_v[idx] * (vs[idx + 1] - value[idx + 1])
        loss = (self.critic(state) - vs.to(state.device)).mean()
        loss.backward()
"""


def test_arithmetic_of_cpu_tensors_written_into_a_cpu_tensor_is_no_device_to_host_copy(tmp_path):
    # machin's IMPALA backward recursion on `.to("cpu")` values (the critic output is typed a device tensor)
    got = [f[1] for f in found(tmp_path, {"i.py": _ADVANTAGES}) if f[2] == "PK102"]
    assert got == [6]  # the `.to("cpu")` itself; not the writes into vs


def test_a_tensor_made_under_a_device_context_is_not_a_cpu_tensor(tmp_path):
    # ManiSkill's `_initialize_episode`: `with torch.device(self.device): xyz = torch.zeros((b, 3))` is on the GPU
    src = """
    import torch

    class Env:
        def _initialize_episode(self, env_idx: torch.Tensor):
            with torch.device(self.device):
                xyz = torch.zeros((len(env_idx), 3))
                xyz[:, 2] = self.cube_half_sizes[env_idx]
                self.cube.set_pose(xyz)

        def step(self, action: torch.Tensor):
            self._initialize_episode(action.argmax(-1))
    """
    assert not [f for f in found(tmp_path, {"e.py": src}) if f[2] == "PK102"]


def test_a_lazy_init_called_from_the_rollout_loop_stays_set_up(tmp_path):
    # torchrl's storage `_init(data)` runs on the first write only: named like set-up, it stays set-up even on a
    # proven per-step path (where `prepare_obs` / `make_obs` would not)
    utils = """
    import torch

    class Storage:
        def _init(self, data):
            self._storage = torch.tensor(data, device="cuda")

        def set(self, data):
            if not self.initialized:
                self._init(data)
    """
    body = """    storage = Storage()
    for step in range(cfg.num_steps):
        actions = agent(obs)
        obs, rewards, terminated, truncated, info = envs.step(actions.cpu().numpy())
        storage.set(rewards)"""
    files = {"pkg/__init__.py": "", "pkg/utils.py": utils,
             "pkg/train.py": _ROLLOUT.format(body=body).replace("import prepare_obs", "import Storage")}
    assert not [f for f in found(tmp_path, files) if f[0] == "utils.py"]


def test_a_copied_slice_or_a_conversion_of_numpy_written_into_a_cpu_tensor_is_not_reported(tmp_path):
    # ManiSkill: `goal_trans[:2, :2] = zrot[:2, :2]` (zrot computed on the CPU, typed a tensor by a method's
    # annotation) and `net_impulse[i] = common.to_tensor(total_impulse)` of a NumPy sum
    src = """
    import numpy as np
    import torch
    from . import common

    class Env:
        def quat_to_zrot(self, q: torch.Tensor) -> torch.Tensor:
            return q

        def step(self, action: torch.Tensor):
            zrot = self.quat_to_zrot(action)
            goal_trans = torch.eye(3)
            goal_trans[:2, :2] = zrot[:2, :2]
            net_impulse = torch.zeros(4, 3)
            net_impulse[0] = common.to_tensor(np.zeros(3))
    """
    files = {"pkg/__init__.py": "", "pkg/common.py": "import torch\ndef to_tensor(x) -> torch.Tensor:\n    return x\n",
             "pkg/env.py": src}
    assert not [f for f in found(tmp_path, files) if f[2] == "PK102"]


# -- a legacy typed constructor's host tensor moved to the device --------------------------------------------------
# (the sixth blind sample's misses, `benchmarks/lint_blind6/`: rlberry's agents upload every batch this way)

_LEGACY = """
import torch

class Agent:
    def __init__(self, device):
        self.device = device
        self.optimizer = None

    def update(self, batch):
        rewards = {expr}
        loss = (rewards * 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""


def test_a_legacy_typed_constructor_moved_to_the_device_is_an_upload(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/agent.py": _LEGACY.format(expr='torch.FloatTensor(batch["rewards"]).to(self.device)')}
    assert [f for f in found(tmp_path, files) if f[1] == 10 and f[2] == "PK109"]


def test_the_device_typed_constructor_is_no_upload(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/agent.py": _LEGACY.format(expr='torch.cuda.FloatTensor(batch["rewards"]).to(self.device)')}
    assert not [f for f in found(tmp_path, files) if f[1] == 10 and f[2] == "PK109"]
