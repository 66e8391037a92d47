"""General shapes of RL training code that the blind samples' missed per-step syncs share (`benchmarks/lint_blind4..7`,
"Known per-step syncs missed"): each rule is written for the shape, never for a codebase's names. Every positive case
fails on the linter before its rule (main at 326d69d), and each has its negative twin."""

from __future__ import annotations

from tests.lint.test_lint_reach import findings

# -- a nested tuple target binds its names -------------------------------------------------------------------------

_NESTED = """
    import torch

    def forward_all(model, x):
        return model(x), None

    class PPO:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt

        def update(self, x):
            (dist, values), _ = forward_all(self.model, x)
            values = values.cpu().numpy()
            loss = dist.mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return values
    """


def test_a_name_bound_in_a_nested_tuple_is_not_its_own_later_result(tmp_path):
    # `(distribs, vs), _ = pack_and_forward(...)` then `vs = vs.cpu().numpy()`: the nested target binds `vs` (unknown
    # here), so the `.cpu()` reads what the forward returned, not the NumPy array it is about to become
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": _NESTED})
    assert ("ppo.py", 13, "PK102", "high") in got, got


def test_a_nested_tuple_of_host_values_stays_host(tmp_path):
    src = _NESTED.replace("(dist, values), _ = forward_all(self.model, x)",
                          "(dist, values), _ = forward_all(self.model, x)\n            values = values.numpy()")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": src})
    assert not [f for f in got if f[2] == "PK102"], got


# -- a call through an imported package's attributes -----------------------------------------------------------------

_CG = """
    import torch

    def conjugate_gradient(fvp, b, tol=1e-10, max_iter=10):
        x = torch.zeros_like(b)
        r = b.clone()
        p = r
        for _ in range(max_iter):
            a = torch.dot(r, r) / torch.dot(fvp(p), p)
            x = x + p * a
            r = r - fvp(p) * a
            if torch.norm(r) < tol:
                return x
        return x
    """

_TRPO = """
    import torch
    import pkg

    class TRPO:
        def __init__(self, policy, opt):
            self.policy, self.opt = policy, opt

        def update(self, batch):
            loss = self.policy(batch).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            grads = torch.cat([p.grad.flatten() for p in self.policy.parameters()])
            return pkg.utils.conjugate_gradient(lambda v: v, grads)

        def describe(self, grads):
            return pkg.utils.conjugate_gradient(lambda v: v, grads)
    """


def test_a_function_called_through_an_imported_package_is_hot(tmp_path):
    # pfrl's TRPO update calls `pfrl.utils.conjugate_gradient(...)` (the package re-exports it): the CG loop's
    # `if torch.norm(r) < tol:` runs every CG iteration of every update (before: the call resolved to nothing)
    files = {"pkg/__init__.py": "from pkg import utils\n",
             "pkg/utils/__init__.py": "from pkg.utils.cg import conjugate_gradient\n",
             "pkg/utils/cg.py": _CG, "pkg/trpo.py": _TRPO}
    got = findings(tmp_path, files)
    assert ("cg.py", 12, "PK103", "high") in got, got


def test_a_package_call_only_from_cold_code_stays_cold(tmp_path):
    files = {"pkg/__init__.py": "from pkg import utils\n",
             "pkg/utils/__init__.py": "from pkg.utils.cg import conjugate_gradient\n",
             "pkg/utils/cg.py": _CG, "pkg/trpo.py": _TRPO.replace(
                 "            return pkg.utils.conjugate_gradient(lambda v: v, grads)\n\n", "\n", 1)}
    got = findings(tmp_path, files)
    assert not [f for f in got if f[0] == "cg.py"], got


def test_a_submodule_reached_through_its_package_is_resolved(tmp_path):
    # `import pkg.utils.cg` then `pkg.utils.cg.conjugate_gradient(...)`: no re-export, the submodule itself
    files = {"pkg/__init__.py": "", "pkg/utils/__init__.py": "", "pkg/utils/cg.py": _CG,
             "pkg/trpo.py": _TRPO.replace("import pkg\n", "import pkg.utils.cg\n").replace(
                 "pkg.utils.conjugate_gradient", "pkg.utils.cg.conjugate_gradient")}
    got = findings(tmp_path, files)
    assert ("cg.py", 12, "PK103", "high") in got, got


# -- a batch collated from host samples, moved to the device -------------------------------------------------------

_COLLATE = """
    from typing import Any, Callable, Sequence
    import torch
    from torch.utils.data._utils.collate import default_collate

    def _to_recursive(batched: Any, device: torch.device) -> Any:
        if isinstance(batched, torch.Tensor):
            return batched.to(device)
        elif isinstance(batched, list):
            return [x.to(device) for x in batched]
        raise TypeError("unsupported")

    def batch_states(states: Sequence[Any], device: torch.device, phi: Callable[[Any], Any]) -> Any:
        features = [phi(s) for s in states]
        collated = default_collate(features)
        if isinstance(features[0], tuple):
            collated = tuple(collated)
        return _to_recursive(collated, device)
    """

_DQN = """
    import torch
    from pkg.batch import batch_states

    class DQN:
        def __init__(self, q, opt, device):
            self.q, self.opt, self.device = q, opt, device

        def update(self, experiences):
            states = batch_states([e["state"] for e in experiences], self.device, lambda x: x)
            loss = self.q(states).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
    """


def test_a_collated_host_batch_moved_to_the_device_is_an_upload(tmp_path):
    # pfrl's `batch_states`: `default_collate` of the env's NumPy observations makes host tensors, and `_to_recursive`
    # (its parameter declared `Any`: what the callers pass) moves them with `.to(device)`, every act and update
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/batch.py": _COLLATE, "pkg/dqn.py": _DQN})
    assert ("batch.py", 8, "PK109", "high") in got, got


def test_a_collated_batch_of_device_tensors_is_no_upload(tmp_path):
    src = _COLLATE.replace("features = [phi(s) for s in states]",
                           "features = [torch.zeros(3, device='cuda') for s in states]")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/batch.py": src, "pkg/dqn.py": _DQN})
    assert not [f for f in got if f[2] == "PK109"], got


# -- host data moved with .to(**kwargs) and host samples stacked --------------------------------------------------

_UTIL = """
    import numpy as np
    import torch

    def check(value):
        return torch.from_numpy(value) if type(value) == np.ndarray else value
    """

_MAPPO = """
    import torch
    from pkg.util import check

    class Trainer:
        def __init__(self, policy, opt, device):
            self.policy, self.opt = policy, opt
            self.tpdv = dict(dtype=torch.float32, device=device)

        def ppo_update(self, sample):
            obs, adv = sample
            adv = check(adv).to(**self.tpdv)
            loss = (self.policy(obs) * adv).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

        def update(self, batch):
            x = torch.stack([torch.as_tensor(b) for b in batch]).to(self.tpdv["device"])
            return self.policy(x)
    """


def test_host_data_moved_with_a_dict_of_keyword_arguments_is_an_upload(tmp_path):
    # MAPPO-style trainers: `check(minibatch_array).to(**self.tpdv)` with `self.tpdv = dict(dtype=..., device=device)`:
    # `check` makes a host tensor of the NumPy minibatch, and the keyword dict names the device (before: no target)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": _UTIL, "pkg/mappo.py": _MAPPO})
    assert ("mappo.py", 12, "PK109", "high") in got, got


def test_a_dict_of_keyword_arguments_without_a_device_moves_nothing(tmp_path):
    src = _MAPPO.replace("dict(dtype=torch.float32, device=device)", "dict(dtype=torch.float32)")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": _UTIL, "pkg/mappo.py": src})
    assert ("mappo.py", 12, "PK109", "high") not in got, got


def test_host_samples_stacked_then_moved_are_an_upload(tmp_path):
    # `torch.stack([torch.as_tensor(b) for b in batch]).to(device)`: a stack of host tensors is a host tensor
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": _UTIL, "pkg/mappo.py": _MAPPO})
    assert [f for f in got if f[1] == 19 and f[2] == "PK109"], got


def test_device_samples_stacked_are_no_upload(tmp_path):
    src = _MAPPO.replace("torch.as_tensor(b)", "torch.zeros(3, device='cuda')")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/util.py": _UTIL, "pkg/mappo.py": src})
    assert not [f for f in got if f[1] == 19 and f[2] == "PK109"], got


# -- a training loop's own per-iteration lines -------------------------------------------------------------------

_AGENT = """
    import torch

    class AgentBase:
        def __init__(self, net, opt, device):
            self.act, self.opt, self.device = net, opt, device

        def explore_env(self, env, horizon_len):
            states = torch.zeros(horizon_len, 3, device=self.device)
            state = env.reset()
            for t in range(horizon_len):
                state = env.step(self.act(state))
                states[t] = state
            return states, states.sum(-1)

        def update_net(self, buffer):
            loss = self.act(buffer[0]).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss
    """

_RUN = """
    import torch

    def train_agent(args, agent, env):
        while args.if_train:
            buffer_items = agent.explore_env(env, args.horizon_len)
            exp_r = buffer_items[1].mean().item()
            agent.update_net(buffer_items)
            print(exp_r)

    class Learner:
        def __init__(self, pipe):
            self.pipe = pipe

        def run(self, agent, args):
            while args.if_train:
                buffer_items = self.pipe.recv()
                agent.update_net(buffer_items)
                exp_r = buffer_items[1].mean().item()

    def evaluate(agent, env, episodes):
        for _ in range(episodes):
            state = env.reset()
            value = agent.act(state).mean().item()
    """


def test_a_training_loops_own_reads_run_every_iteration(tmp_path):
    # ElegantRL's `while if_train: buffer_items = agent.explore_env(...); exp_r = buffer_items[2].mean().item();
    # agent.update_net(buffer)`, and its Learner process's loop fed by workers: each iteration reads the rollout
    # once (before: only what the loop calls was hot, not its own lines)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _AGENT, "pkg/run.py": _RUN})
    assert ("run.py", 7, "PK101", "high") in got, got  # the collector's return: device tensors
    assert ("run.py", 19, "PK101", "medium") in got, got  # from a pipe: unknown, hot but not proven


def test_a_loop_that_trains_nothing_stays_cold(tmp_path):
    # the negative twin: an evaluation loop calls the agent but no learner update
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _AGENT, "pkg/run.py": _RUN})
    assert not [f for f in got if f[0] == "run.py" and f[1] == 24], got


# -- a learning agent's property read every gradient step; calling a module object ------------------------------

_SAC = """
    import torch
    from torch import nn

    class TemperatureHolder(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_temperature = nn.Parameter(torch.zeros(()))

        def forward(self):
            return torch.exp(self.log_temperature)

    class SAC:
        def __init__(self, q, opt):
            self.q, self.opt = q, opt
            self.temperature_holder = TemperatureHolder()

        @property
        def temperature(self):
            return float(self.temperature_holder())

        @property
        def alpha_np(self):
            return self.temperature_holder().detach().cpu().numpy()

        def update(self, batch):
            loss = self.q(batch).mean() * self.temperature
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

        def describe(self):
            return self.alpha_np
    """


def test_a_learners_property_read_in_its_update_runs_the_getter(tmp_path):
    # pfrl's SAC reads `self.temperature` (a property: `float(self.temperature_holder())`) every gradient step; the
    # holder is an nn.Module whose forward returns a device tensor (before: the getter was never hot, and calling the
    # module object was of unknown kind)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/sac.py": _SAC})
    assert ("sac.py", 20, "PK104", "high") in got, got
    assert not [f for f in got if f[1] == 24], got  # a property only cold code reads stays cold


def test_the_properties_of_a_class_that_does_not_learn_stay_cold(tmp_path):
    src = _SAC.replace("            loss.backward()\n            self.opt.step()\n", "            return loss\n")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/sac.py": src})
    assert ("sac.py", 20, "PK104", "high") not in got, got


def test_calling_a_module_object_returns_what_its_forward_returns(tmp_path):
    # the negative twin of the typing: a forward that returns a Python number
    src = _SAC.replace("return torch.exp(self.log_temperature)", "return 0.5")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/sac.py": src})
    assert not [f for f in got if f[1] == 20], got


def test_calling_a_module_object_in_an_update_reads_its_forwards_tensor(tmp_path):
    src = _SAC.replace("loss = self.q(batch).mean() * self.temperature",
                       "loss = self.q(batch).mean() * float(self.temperature_holder())")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/sac.py": src})
    assert ("sac.py", 27, "PK104", "high") in got, got


# -- a gym loop's observations: the reset above the loop steps the same host env -----------------------------------

_GYM_LOOP = """
    import torch

    class Agent:
        def __init__(self, model, opt, device):
            self.model, self.opt, self.device = model, opt, device

        def select_action(self, obs):
            return self.model(obs).argmax(-1).cpu().numpy()

        def update(self, batch):
            loss = self.model(batch).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

    def run(agent, env, steps, device):
        obs, _ = env.reset()
        for t in range(steps):
            obs_t = torch.as_tensor(obs, dtype=torch.float32, device=device)
            action = agent.select_action(obs_t)
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
            agent.update(obs_t)
    """


def test_the_first_reset_of_an_env_stepped_with_host_actions_is_host_data(tmp_path):
    # `obs, _ = env.reset()` above the loop is typed before the loop's `action = agent.select_action(...)` (which
    # returns `.cpu().numpy()`) is bound, so the env was not yet known to take host actions: the reset read as device
    # tensors, and `torch.as_tensor(obs, device=d)` at the top of every step as "already on the device"
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/loop.py": _GYM_LOOP})
    assert ("loop.py", 20, "PK109", "high") in got, got


def test_an_env_stepped_with_device_actions_still_returns_device_data(tmp_path):
    src = _GYM_LOOP.replace("return self.model(obs).argmax(-1).cpu().numpy()", "return self.model(obs).argmax(-1)")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/loop.py": src})
    assert ("loop.py", 20, "PK109", "high") not in got, got


# -- a one-line helper reading its argument to the host, reported where it is called ---------------------------------

_T2N = """
    import numpy as np
    import torch

    def _t2n(x):
        return x.detach().cpu().numpy()

    class Runner:
        def __init__(self, policy, envs, n):
            self.policy, self.envs, self.n = policy, envs, n

        def run(self, steps, obs):
            for step in range(steps):
                values = torch.zeros(self.n, device="cuda") + self.policy(obs)
                actions = np.array(np.split(_t2n(values), self.n))
                host = np.array(np.split(_t2n(torch.zeros(3)), self.n))
                obs, rewards, dones, infos = self.envs.step(actions)
    """


def test_a_one_line_host_reader_is_reported_where_a_rollout_calls_it(tmp_path):
    # MAPPO runners' `np.split(_t2n(values), n)` every step: the helper's own line says it once; the per-step site a
    # reader looks for is the call (before: only the helper's line)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/runner.py": _T2N})
    assert ("runner.py", 15, "PK102", "high") in got, got
    assert not [f for f in got if f[1] == 16], got  # a host tensor's read is no sync


def test_a_helper_doing_more_than_reading_keeps_its_one_finding(tmp_path):
    src = _T2N.replace("        return x.detach().cpu().numpy()\n",
                       "        y = x.detach().cpu().numpy()\n        return y.reshape(-1)\n")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/runner.py": src})
    assert not [f for f in got if f[1] in (16, 17)], got


def test_a_training_loops_periodic_log_stays_cold(tmp_path):
    # `if it % 10 == 0: print(loss.item())` in the iteration loop: once every N iterations, not every one
    src = _RUN.replace("            print(exp_r)\n",
                       "            if args.it % 10 == 0:\n                print(buffer_items[0].sum().item())\n")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": _AGENT, "pkg/run.py": src})
    assert ("run.py", 7, "PK101", "high") in got, got
    assert not [f for f in got if f[0] == "run.py" and f[1] == 10], got


# -- the items of a returned tuple: a loss and a dict of host statistics ---------------------------------------------

_SPINUP = """
    import torch

    class PPO:
        def __init__(self, pi, opt, target_kl):
            self.pi, self.opt, self.target_kl = pi, opt, target_kl

        def compute_loss_pi(self, data):
            logp = torch.log_softmax(self.pi(data), -1)
            kl = (data - logp).mean()
            return -logp.mean(), dict(kl=kl.item())

        def update(self, data):
            for i in range(80):
                loss_pi, pi_info = self.compute_loss_pi(data)
                if pi_info["kl"] > 1.5 * self.target_kl:
                    break
                self.opt.zero_grad()
                loss_pi.backward()
                self.opt.step()
    """


def test_a_dict_of_host_statistics_returned_beside_a_loss_is_host_data(tmp_path):
    # SpinningUp's `loss_pi, pi_info = compute_loss_pi(data)`: the function returns a tensor, so every unpacked name
    # was typed a tensor, and `pi_info["kl"] > target` (a Python float from `.item()`) read as a truth value
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": _SPINUP})
    assert not [f for f in got if f[2] == "PK103"], got


def test_a_device_statistic_returned_beside_a_loss_is_still_a_tensor(tmp_path):
    src = _SPINUP.replace("dict(kl=kl.item())", "kl").replace('pi_info["kl"]', "pi_info")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": src})
    assert ("ppo.py", 16, "PK103", "high") in got, got


# -- a host tensor written or copied into a device buffer ----------------------------------------------------------

_STORE = """
    import numpy as np
    import torch

    class RolloutBuffer:
        def __init__(self, n, device):
            self.obs = torch.zeros(n, 4, device=device)
            self.actions = torch.zeros(n, dtype=torch.long, device=device)
            self.host = torch.zeros(n, 4)

        def add(self, t, obs, n_actions):
            self.obs[t] = torch.as_tensor(obs)
            self.actions[t] = torch.randint(n_actions, ())
            self.obs.copy_(torch.from_numpy(np.zeros((4,))))
            self.host[t] = torch.as_tensor(obs)
            self.obs.copy_(torch.from_numpy(np.zeros((4,))), non_blocking=True)
    """


def test_a_host_tensor_written_into_a_device_buffer_is_an_upload(tmp_path):
    # `self.obs[t] = torch.as_tensor(next_obs)` and an explorer's host random action stored into the device rollout
    # (ElegantRL's `self.p0s[i] = th.normal(...)`): blocking copies from pageable host memory, every step (before:
    # only the reverse direction, a device result written into a host buffer, was read)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/storage.py": _STORE})
    assert {(f[1], f[2]) for f in got} >= {(12, "PK109"), (13, "PK109"), (14, "PK109")}, got
    assert not [f for f in got if f[1] in (15, 16)], got  # host into host; a non-blocking copy


def test_host_writes_under_a_framework_default_device_are_not_uploads(tmp_path):
    # Genesis' gs.init (called by the user's script) makes device-less factories device tensors
    src = _STORE.replace("import numpy as np\n", "import numpy as np\n    import genesis as gs\n")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/storage.py": src})
    assert not [f for f in got if f[2] == "PK109"], got


# -- .to(x.device): where x lives --------------------------------------------------------------------------------

_TO_DEVICE_OF = """
    import torch

    class DQN:
        def __init__(self, q, opt, device):
            self.q, self.opt, self.device = q, opt, device

        def update(self, batch):
            reward = torch.tensor(batch["reward"])
            state = torch.tensor(batch["state"]).to(self.device)
            next_value = self.q(state).max(-1).values
            next_value = next_value.to(reward.device)
            same = reward.to(reward.device)
            y = reward + 0.99 * next_value
            loss = (self.q(state).max(-1).values - y.to(state.device)).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
    """


def test_a_device_tensor_moved_to_a_host_tensors_device_is_a_download(tmp_path):
    # machin's `next_value.to(reward.device)` with the reward batch on the host: a device-to-host copy every update,
    # and the target built from it goes back up with `.to(state.device)`
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/dqn.py": _TO_DEVICE_OF})
    assert ("dqn.py", 12, "PK102", "high") in got, got
    assert ("dqn.py", 15, "PK109", "high") in got, got
    assert not [f for f in got if f[1] == 13], got  # host to host


def test_a_device_tensor_moved_to_a_device_tensors_device_stays(tmp_path):
    src = _TO_DEVICE_OF.replace('reward = torch.tensor(batch["reward"])',
                                'reward = torch.tensor(batch["reward"], device=self.device)')
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/dqn.py": src})
    assert not [f for f in got if f[1] in (12, 13, 15)], got


# -- loops over time steps are not loops over envs ----------------------------------------------------------------

_RETURNS = """
    import torch

    class Learner:
        def __init__(self, opt, rff):
            self.opt, self.rff = opt, rff

        def update(self, rewards: torch.Tensor, continues: torch.Tensor, values: torch.Tensor):
            vals = [values[-1:]]
            for t in reversed(range(len(continues))):
                vals.append(rewards[t] + continues[t] * vals[-1])
            for step in range(rewards.size(0)):
                rewards[step] = self.rff.update(rewards[step])
            for i in range(rewards.shape[0]):
                rewards[i] = rewards[i].clamp(0, 1)
            loss = torch.cat(vals).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
    """


def test_a_recursion_over_time_steps_is_no_loop_over_envs(tmp_path):
    # sheeprl's lambda-returns `for t in reversed(range(len(continues)))`, rllte's reward filter `for step in
    # range(rewards.size(0))`: sequential over a rollout's steps (labelled wrong as PK301 in blind5)
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/learner.py": _RETURNS})
    assert not [f for f in got if f[2] == "PK301" and f[1] in (10, 12)], got
    assert ("learner.py", 14, "PK301", "high") in got, got  # an index loop over the rows stays one


_PIECES = """
    import torch
    import torch.nn.functional as F

    class Encoder:
        def forward(self, obs: torch.Tensor, nvec):
            parts = [F.one_hot(o, int(n)) for o, n in zip(torch.split(obs.long(), 1, dim=1), nvec)]
            for i, row in enumerate(obs.unbind(-1)):
                parts.append(F.one_hot(row, 3))
            for i, row in enumerate(torch.split(obs, 1)):
                parts.append(F.one_hot(row, 3))
            return torch.cat(parts, -1)
    """


def test_pieces_along_a_feature_dimension_are_no_rows_over_envs(tmp_path):
    # rllte's MultiDiscrete preprocessing iterates `th.split(obs, 1, dim=1)`: one one-hot per observation component
    # (labelled wrong as PK303 in blind5); pieces along dim 0 are rows, still reported
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/enc.py": _PIECES})
    assert not [f for f in got if f[2] == "PK303" and f[1] in (7, 8)], got
    assert ("enc.py", 10, "PK303", "medium") in got or ("enc.py", 10, "PK303", "high") in got, got
