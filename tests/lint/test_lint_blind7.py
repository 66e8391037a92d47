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
