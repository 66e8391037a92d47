"""Rules that make recall transfer to code the rules were not tuned on: general shapes of RL training code read off
the per-step sites every labelled sample still missed (`benchmarks/lint_blind4`-`6`, `lint_heldout`), none of them a
codebase's names. Each positive case fails on the linter before its fix (branch `lint` at 896ea11), and each has its
negative twin."""

from __future__ import annotations

import textwrap

from perfkit.lint import Options, lint_source
from tests.lint.helpers import lint_project


def found(src: str, **options) -> list:
    """(line, rule, confidence) of one module."""
    return [(v.line, v.rule, v.confidence) for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


def found_in(tmp_path, files: dict, **options) -> list:
    """(file, line, rule, confidence) of the project ``files``."""
    return sorted((v.path.rsplit("/", 1)[-1], v.line, v.rule, v.confidence)
                  for v in lint_project(tmp_path, files, **options))


# -- a `while` rollout loop's test runs every step --------------------------------------------------------------

def test_the_test_of_a_while_loop_that_steps_the_env_is_per_step():
    # rl4co's decoding loop: `while not td["done"].all():` around `env.step(td)`, in a function no name makes hot
    src = """
    import torch

    def decode(policy, env, td):
        while not td["done"].all():
            td = env.step(policy(td))["next"]
        return td
    """
    assert (5, "PK103", "high") in found(src)


def test_the_iterable_of_a_for_loop_is_evaluated_once():
    src = """
    import torch

    def decode(policy, env, td, n):
        for i in range(int(td["steps"].sum())):
            td = env.step(policy(td))["next"]
        return td
    """
    assert not [f for f in found(src) if f[0] == 5]


# -- each operand of a multi-line `and` / `or` is its own sync, reported where it is written ---------------------

_PROBS = """
import torch

def assert_output_is_probs(tensor):
    if (
        tensor.dim() == 2
        and torch.all(torch.abs(torch.sum(tensor, dim=1) - 1.0) < 1e-5)
        and torch.all(tensor >= 0)
    ):
        return
    raise ValueError("not probabilities")

class Env:
    def step(self, action):
        assert_output_is_probs(self.actor(action))
"""


def test_every_tensor_operand_of_a_multi_line_test_is_reported_on_its_line():
    # machin's assert_output_is_probs: both torch.all() operands sync; the first operand is a host int comparison
    got = [f for f in found(_PROBS) if f[1] == "PK103"]
    assert [f[0] for f in got] == [7, 8]


def test_a_single_line_test_with_two_tensor_operands_stays_one_finding():
    src = _PROBS.replace("""        tensor.dim() == 2
        and torch.all(torch.abs(torch.sum(tensor, dim=1) - 1.0) < 1e-5)
        and torch.all(tensor >= 0)""", """        torch.all(tensor >= 0) and torch.all(tensor <= 1)""")
    assert [f for f in found(src) if f[1] == "PK103"] == [(6, "PK103", "high")]


# -- the sync op's vocabulary -----------------------------------------------------------------------------------

_STEP = """
import numpy as np
import torch

class Env:
    def __init__(self):
        self.x = torch.zeros(4, device="cuda")

    def step(self, action):
{body}
"""


def _in_step(body: str) -> str:
    return _STEP.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


def test_a_host_tensor_moved_with_a_device_keyword_is_an_upload():
    # sheeprl's `torch.from_numpy(array).to(device=..., dtype=...)`: the keyword form of .to(device)
    assert (10, "PK109", "high") in found(_in_step("y = torch.from_numpy(np.zeros(3)).to(device=self.x.device, "
                                                   "dtype=torch.float32)"))
    assert not found(_in_step("y = torch.from_numpy(np.zeros(3)).to(dtype=torch.float32)"))


def test_numpy_force_true_copies_a_device_tensor_to_the_host():
    # imitation's `acts_th.numpy(force=True)`: .cpu() inside; a plain .numpy() raises on a CUDA tensor instead
    assert (10, "PK102", "high") in found(_in_step("a = self.x.numpy(force=True)"))
    assert not found(_in_step("a = self.x.numpy()"))


def test_str_format_of_a_device_tensor_formats_it_on_the_host():
    # mushroom-rl's `tqdm.write("... kl {}".format(logging_kl))`, like an f-string of the tensor
    assert (10, "PK105", "high") in found(_in_step('print("kl {}".format(self.x.mean()))'))
    assert not found(_in_step('print("n {}".format(len(action)))'))


# -- a function returned by a factory / dispatcher runs where its result is called ----------------------------

_UTILS = """
import numpy as np
import torch

def gae(rewards, values, device):
    adv = np.zeros(len(rewards))
    return torch.from_numpy(adv).to(device)

def scan_gae(rewards, values, device):
    return rewards - values

def gae_function(method):
    methods = {"loop": gae, "scan": scan_gae}
    return methods[method]
"""

_TRAIN = """
import torch
from .utils import gae_function

def main(envs, agent, cfg):
    gae = gae_function(cfg.gae_method)
    obs = envs.reset()
    for it in range(cfg.iterations):
        for step in range(cfg.rollout_steps):
            obs, rewards, dones, info = envs.step(agent(obs))
{after}
"""


def test_a_function_a_dispatcher_returns_is_hot_where_the_loop_calls_it(tmp_path):
    # sheeprl's `gae = gae_function(cfg.algo.gae_method)` then `gae(...)` once per training iteration
    files = {"pkg/__init__.py": "", "pkg/utils.py": _UTILS,
             "pkg/train.py": _TRAIN.format(after="        returns = gae(rewards, agent.values, cfg.device)")}
    assert ("utils.py", 7, "PK109", "high") in found_in(tmp_path, files)


def test_a_dispatched_function_never_called_in_a_loop_stays_cold(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/utils.py": _UTILS, "pkg/train.py": _TRAIN.format(after="        pass")}
    assert not [f for f in found_in(tmp_path, files) if f[0] == "utils.py"]


# -- what makes a function per-step ----------------------------------------------------------------------------

_AGENT = """
import torch

class A2C:
    def __init__(self, actor, critic):
        self.actor, self.critic = actor, critic
        self.optim = torch.optim.Adam(critic.parameters())

    def store_episode(self, episode):
        for trans in episode:
            trans["value"] = self._criticize(trans["state"]).item()

    def update(self, batch):
        loss = self.critic(batch).mean()
        loss.backward()
        self.optim.step()
"""


def test_a_learning_agents_per_step_entry_is_a_proven_per_step_path():
    # machin's A2C.store_episode: the receiver is untyped, but a learning agent's store / act runs every env step
    assert (11, "PK101", "high") in found(_AGENT)


def test_the_same_entry_of_a_class_that_never_learns_is_not_hot():
    src = _AGENT.replace("""        loss.backward()
        self.optim.step()""", "        return loss")
    assert not [f for f in found(src) if f[0] == 11]


_WARMUP = """
import torch

class BEARImpl:
    def forward(self, batch, warm):
        if warm:
            return self.warmup_actor(batch)
        return self.policy(batch)

    def warmup_actor(self, batch):
        loss = self.compute_loss(batch)
        loss["loss"].backward()
        self.actor_optim.step()
        return {"actor_loss": float(loss["loss"].cpu().detach().numpy())}
"""


def test_a_hot_function_that_makes_one_gradient_step_is_proven_whatever_its_name():
    # d3rlpy's warmup_actor: not named like a learner update, but each call is one gradient step
    assert (14, "PK102", "high") in found(_WARMUP)


def test_a_gradient_step_function_no_hot_code_calls_stays_cold():
    src = _WARMUP.replace("            return self.warmup_actor(batch)", "            return None")
    assert not [f for f in found(src) if f[0] == 14]


_BUFFER = """
import torch

class {name}:
    def __init__(self, buffer, reward_fn):
        self.buffer, self.reward_fn = buffer, reward_fn

    def sample(self, batch_size):
        samples = self.buffer.sample(batch_size)
        rewards = self.reward_fn(samples.observations.cpu().numpy())
        return samples, rewards
"""


def test_a_replay_buffers_sample_runs_every_gradient_step():
    # imitation's ReplayBufferRewardWrapper.sample, called by SB3's SAC outside the linted files
    assert (10, "PK102", "high") in found(_BUFFER.format(name="ReplayBufferRewardWrapper"))


def test_sample_of_a_class_not_named_like_a_storage_is_not_hot():
    assert not found(_BUFFER.format(name="RewardRelabeller"))


# -- where a tensor lives: a converter's result, and its keyword arguments ---------------------------------------

_CONVERT = """
import numpy as np
import torch as th

def safe_to_tensor(array, **kwargs) -> th.Tensor:
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        array = array.copy()
    return th.as_tensor(array, **kwargs)
"""

_NET = """
import torch as th
from . import util

class RewardNet(th.nn.Module):
    def preprocess(self, state):
        return util.safe_to_tensor(state).to(self.device)

    def forward(self, state):
        return self.net(self.preprocess(state))

class BC:
    def train(self, batches):
        for batch in batches:
            acts = util.safe_to_tensor(batch["acts"], device=self.policy.device)
            loss = self.loss(acts)
            loss.backward()
            self.optimizer.step()
"""


def test_a_converter_annotated_tensor_that_builds_host_tensors_returns_host_data(tmp_path):
    # imitation's `util.safe_to_tensor(state).to(self.device)`: `-> th.Tensor` does not say where; every return is
    # `th.as_tensor(array)` without a device, so the .to(device) is the upload; and BC.train's hot call passes
    # device= through the converter's **kwargs: the as_tensor there is an upload too
    files = {"pkg/__init__.py": "", "pkg/util.py": _CONVERT, "pkg/nets.py": _NET}
    got = found_in(tmp_path, files)
    assert ("util.py", 8, "PK109", "high") in got
    assert ("nets.py", 7, "PK109", "high") in got


def test_a_converter_no_hot_call_gives_a_device_uploads_nothing_itself(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/util.py": _CONVERT,
             "pkg/nets.py": _NET.replace(", device=self.policy.device", "")}
    assert not [f for f in found_in(tmp_path, files) if f[0] == "util.py"]


def test_a_converter_given_a_device_returns_a_device_tensor(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/util.py": _CONVERT,
             "pkg/nets.py": _NET.replace("util.safe_to_tensor(state).to(self.device)",
                                         "util.safe_to_tensor(state, device=self.device).to(self.device)")}
    assert not [f for f in found_in(tmp_path, files) if f[0] == "nets.py" and f[2] == "PK109"]


def test_a_converter_that_copies_a_read_only_array_first_still_converts_its_parameter(tmp_path):
    # imitation's safe_to_tensor: `if isinstance(array, np.ndarray) ...: array = array.copy()` rebinds the parameter
    # on one path; on the other the parameter as passed (array or tensor) reaches th.as_tensor: a conversion
    files = {"pkg/__init__.py": "", "pkg/util.py": _CONVERT.replace("array, **kwargs)", "array: np.ndarray | th.Tensor, **kwargs)", 1),
             "pkg/nets.py": _NET}
    assert ("util.py", 8, "PK109", "high") in found_in(tmp_path, files)


# -- an @overload signature is not the method ---------------------------------------------------------------------

_OVERLOAD = """
from typing import Optional, overload
import numpy as np
import torch as th

class Trainer:
    @overload
    def _torchify(self, a: np.ndarray) -> th.Tensor: ...

    @overload
    def _torchify(self, a: None) -> None: ...

    def _torchify(self, a: Optional[np.ndarray]) -> Optional[th.Tensor]:
        return th.as_tensor(a, device=self.device)

    def train_disc(self, batches):
        for batch in batches:
            labels = self._torchify(batch["labels"])
            loss = self.disc(batch, labels).mean()
            loss.backward()
            self.opt.step()
"""


def test_a_method_declared_with_overload_signatures_runs_its_implementation():
    # imitation's AdversarialTrainer._torchify_array: the first def of the name is an @overload stub
    assert (14, "PK109", "high") in found(_OVERLOAD)


def test_an_implementation_no_hot_code_calls_stays_cold():
    assert not found(_OVERLOAD.replace("            labels = self._torchify(batch[\"labels\"])\n", ""))


# -- more host/device copies -------------------------------------------------------------------------------------

_AUX = """
import torch as th

class PPG:
    def __init__(self, n):
        self.aux_obs = th.empty(size=(n, 4), device="cpu")

    def update(self):
        self.aux_obs[:4].copy_({src})
        loss = self.policy(self.aux_obs.to(self.device)).mean()
        loss.backward()
        self.opt.step()
"""


def test_copying_device_data_into_a_cpu_buffer_is_a_device_to_host_copy():
    # rllte's PPG: `self.aux_obs[...].copy_(self.storage.observations[:-1])` into buffers made with device="cpu"
    assert (9, "PK102", "high") in found(_AUX.format(src="self.storage.observations[:-1]"))
    assert (9, "PK102", "high") in found(_AUX.format(src="th.ones(4, 4, device='cuda')"))


def test_an_asynchronous_or_host_to_host_copy_is_no_sync():
    assert not [f for f in found(_AUX.format(src="th.ones(4, 4)")) if f[0] == 9]
    assert not [f for f in found(_AUX.format(src="self.storage.obs, non_blocking=True")) if f[0] == 9]
    assert not [f for f in found(_AUX.format(src="self.storage.obs, non_blocking=self.pinned")) if f[0] == 9]


def test_a_factory_inside_a_device_scope_uploads_its_host_data():
    # sheeprl's SAC prepare_obs: `with fabric.device: torch.as_tensor(obs[k].copy())` makes the tensor on the device
    body = """
    with self.fabric.device:
        y = torch.as_tensor(np.zeros(3), dtype=torch.float32)
    """
    assert (11, "PK109", "high") in found(_in_step(body))
    assert not [f for f in found(_in_step(body.replace("self.fabric.device", "torch.device('cpu')")))
                if f[1] == "PK109"]


def test_max_of_a_tensor_and_a_number_compares_it_on_the_host():
    # autonomous-learning-library's SAC: `self.temperature = max(0, self.temperature + lr * grad)`
    assert (10, "PK104", "high") in found(_in_step("t = max(0, self.x.sum())"))
    assert not found(_in_step("t = max(0, len(action))"))


# -- where a factory without device= allocates ---------------------------------------------------------------------

_CPU_ENV = """
import numpy as np
import torch
{extra}

class BaseEnv:
    def __init__(self, n, dev):
        self.actions = None
        self._init_buffers(n, dev)

    def _init_buffers(self, n, dev):
        if self.actions is None:
            self.actions = torch.zeros(n, 3, device=dev)

class CpuEnv(BaseEnv):
    def __init__(self, n):
        self._control = torch.from_numpy(np.zeros((n, 3)))
        self.actions = torch.zeros(n, 3)
        super().__init__(n, "cpu")

    def step(self, a):
        self._control.copy_(self.actions)
"""


def test_a_subclass_that_keeps_an_attribute_on_the_host_overrides_the_bases_device_fallback():
    # perfkit's own CPU MuJoCo env: `self.actions = torch.zeros(n)` in the subclass; the base's device fallback
    # (`if self.actions is None:`) never runs for it, so copying it into a host buffer copies host data
    assert not found(_CPU_ENV.format(extra=""))


def test_a_string_naming_set_default_device_sets_no_default_device():
    # a linter's own tables mention `set_default_device(` in a regex: no code there calls it
    assert not found(_CPU_ENV.format(extra='PATTERN = r"set_default_device\\\\((?!cpu)"'))
    assert (22, "PK102", "high") in found(_CPU_ENV.format(extra='torch.set_default_device("cuda")'))


def test_cpu_of_an_untyped_value_is_a_tensors_copy_even_where_torch_is_not_imported():
    # imitation's replay_buffer_wrapper imports only stable_baselines3: `samples.observations.cpu()` of the SB3
    # replay sample, every gradient step through the wrapped buffer's `sample`
    src = _BUFFER.format(name="ReplayBufferRewardWrapper").replace("import torch\n", "import numpy as np\n")
    assert (10, "PK102", "high") in found(src)
    assert not found(src.replace(".cpu().numpy()", ".copy()"))


# -- confidence: a torch-only method on a proven per-step path ----------------------------------------------------

def test_clone_of_an_untyped_value_on_a_proven_per_step_path_is_high():
    # rl4co's `next_rec = solution_to.clone()` in an env step: `.clone()` is torch's (NumPy's is `.copy()`); medium
    # off proven paths (`forward`), high where the code runs every step, like the sync ops
    assert (10, "PK202", "high") in found(_in_step("y = self.other.clone()"))
    src = _in_step("y = self.other.clone()").replace("def step(self, action):", "def forward(self, action):")
    assert (10, "PK202", "medium") in found(src)


# -- `~` of an index is a mask's negation ---------------------------------------------------------------------------

def test_a_scalar_written_through_a_negated_mask_is_a_masked_fill_not_a_sync():
    # rl4co's `logprobs[~mask] = 0` with `mask: torch.Tensor`: a Python scalar through a boolean mask does not wait
    # (docs' PK113 page); `~` of an index is a mask's negation, whatever the annotation says
    src = """
    import torch

    class Env:
        def step(self, logprobs: torch.Tensor, mask: torch.Tensor):
            logprobs[~mask] = 0
            return logprobs
    """
    assert not found(src)


def test_reading_through_a_negated_mask_is_a_boolean_mask_read():
    src = """
    import torch

    class Env:
        def step(self, logprobs: torch.Tensor, mask: torch.Tensor):
            return logprobs[~mask].sum()
    """
    assert (6, "PK107", "high") in found(src)


# -- a count is a Python int ---------------------------------------------------------------------------------------

def test_a_count_returned_by_an_unknown_call_fed_a_tensor_is_no_tensor():
    # rl4co's POMO: `n_start = self.env.get_num_starts(td)` then `if n_start > 1:` — a Python int
    body = """
    n = self.sim.get_num_starts(self.x)
    if n > 1:
        pass
    """
    assert not found(_in_step(body))
    assert (11, "PK103", "high") in found(_in_step(body.replace("get_num_starts", "get_starts")))
