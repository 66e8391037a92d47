"""Attribution through libraries, step detection through wrappers and segment rules for library code —
on a small "library" installed into a temporary site-packages directory."""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

from perfkit.collectors import sites
from perfkit.config import Config
from perfkit.profile.session import Session

LIB = {
    "fakerl/__init__.py": "",
    "fakerl/logger.py": '''
        class Logger:
            def __init__(self):
                self.total = 0.0

            def process_env_step(self, rewards):
                self.total += rewards.mean().item()  # <- logger sync
    ''',
    "fakerl/algo.py": '''
        import torch


        class PPO:
            def __init__(self):
                self.net = torch.nn.Linear(4, 1)
                self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.01)

            def update(self, obs):
                mean_loss = 0.0
                for _ in range(3):  # minibatches
                    loss = self.net(obs).pow(2).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    mean_loss += loss.item()  # <- learner sync
                return mean_loss / 3
    ''',
    "fakerl/mdp/__init__.py": "",
    "fakerl/mdp/rewards.py": '''
        def alive_bonus(env):
            return env.x[:, 0] * 0.0 + 1.0

        def upright(env):
            bad = (env.x[:, 1] > 5.0).nonzero()  # <- reward sync
            return env.x[:, 1] * 0.1
    ''',
    "fakerl/env.py": '''
        import torch

        from fakerl.mdp import rewards


        class ObservationManager:
            def __init__(self, env):
                self.env = env

            def compute(self):
                return self.env.x * 1.0


        class ManagerEnv:
            def __init__(self, num_envs):
                self._num_envs = num_envs
                self.x = torch.zeros(num_envs, 4)
                self.obs_manager = ObservationManager(self)

            @property
            def num_envs(self):
                return self._num_envs

            def step(self, actions):
                self.x.add_(actions)
                r = rewards.alive_bonus(self) + rewards.upright(self)
                obs = self.obs_manager.compute()
                return obs, r


        class Wrapper:
            """gymnasium-style: no num_envs of its own, the env it wraps in .env"""

            def __init__(self, env):
                self.env = env

            def step(self, actions):
                return self.env.step(actions)
    ''',
}

SCRIPT = '''
from fakerl.env import ManagerEnv, Wrapper
from fakerl.algo import PPO
from fakerl.logger import Logger
import torch


def main(steps, every=4):
    env = Wrapper(ManagerEnv(8))
    algo, log = PPO(), Logger()
    a = torch.full((8, 4), 0.01)
    for i in range(steps):
        obs, r = env.step(a)  # <- user step
        log.process_env_step(r)  # <- user log
        float(r.sum())  # <- user sync
        if (i + 1) % every == 0:
            algo.update(obs)  # <- user update
'''


@pytest.fixture
def fakelib(tmp_path, monkeypatch):
    site_dir = tmp_path / "site-packages"
    for rel, text in LIB.items():
        p = site_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    (tmp_path / "user_train.py").write_text(textwrap.dedent(SCRIPT))
    monkeypatch.syspath_prepend(str(site_dir))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sites, "_SITE_ROOTS", sites._SITE_ROOTS + (str(site_dir) + "/",))
    sites._cache.clear()
    sites.library_of.cache_clear()
    for m in [m for m in sys.modules if m == "fakerl" or m.startswith("fakerl.") or m == "user_train"]:
        del sys.modules[m]
    yield importlib.import_module("user_train")
    sites._cache.clear()
    sites.library_of.cache_clear()
    for m in [m for m in sys.modules if m == "fakerl" or m.startswith("fakerl.") or m == "user_train"]:
        del sys.modules[m]


def _line(mod_file, marker):
    with open(mod_file) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def test_syncs_inside_a_library_sit_at_its_lines_with_the_chain_to_user_code(fakelib):
    with Session(warmup_steps=3, count_cpu_tensors=True) as s:
        fakelib.main(40)
    run = s.run
    assert run.num_envs == 8 and run.steps == 37
    syncs = {(f.path.rsplit("/", 2)[-2] + "/" + f.path.rsplit("/", 1)[-1], f.op): f for f in run.findings_of("sync")}
    log = syncs[("fakerl/logger.py", ".item()")]
    assert log.line == _line(sys.modules["fakerl.logger"].__file__, "# <- logger sync")
    assert log.library == "fakerl" and log.segment == "logging" and log.per_step == 1.0
    assert log.chain[-1].endswith(f"user_train.py:{_line(fakelib.__file__, '# <- user log')}")
    learn = syncs[("fakerl/algo.py", ".item()")]
    assert learn.segment == "learner"
    assert learn.per_step == pytest.approx(3 / 4, abs=0.03)  # 3 minibatches every 4th step
    assert learn.chain[-1].endswith(f"user_train.py:{_line(fakelib.__file__, '# <- user update')}")
    rew = syncs[("mdp/rewards.py", ".nonzero()")]
    assert rew.segment == "reward" and rew.per_step == 1.0
    user = [f for f in run.findings_of("sync") if f.path.endswith("user_train.py")]
    assert [(f.op, f.library, len(f.chain)) for f in user] == [("float(t)", None, 1)]  # the chain is the site itself
    assert len(rew.chain) >= 2 and rew.chain[-1].endswith(f"user_train.py:{_line(fakelib.__file__, '# <- user step')}")


def test_other_is_broken_down_by_the_env_steps_callees(fakelib):
    with Session(warmup_steps=3) as s:
        fakelib.main(40)
    other = s.run.segments["other"]
    assert other.children and "ObservationManager.compute" in other.children
    assert other.children["ObservationManager.compute"].calls_per_step == pytest.approx(1.0, abs=0.05)
    assert "reward" in s.run.segments and "learner" in s.run.segments


def test_user_code_only_reports_at_the_users_lines(fakelib):
    with Session(warmup_steps=3, count_cpu_tensors=True, config=Config(user_code_only=True)) as s:
        fakelib.main(20)
    # only the user's own lines: the libraries' calls on CPU tensors are theirs, not the user's
    lines = {(f.path.rsplit("/", 1)[-1], f.line) for f in s.run.findings_of("sync")}
    assert lines == {("user_train.py", _line(fakelib.__file__, "# <- user sync"))}
    assert all(len(f.chain) <= 1 and f.library is None for f in s.run.findings)
    assert not sites.user_code_only  # the session put it back


def test_configured_step_method_names():
    class Env:
        num_envs = 8

        def __init__(self):
            self.x = torch.zeros(8)

        def env_step(self, a):
            self.x.add_(a)
            return self.x

    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=1, config=Config(step_methods=("env_step",))) as s:
        for _ in range(10):
            env.env_step(a)
    assert s.run.total_steps == 10 and s.run.num_envs == 8


def test_a_pip_target_folder_on_the_path_is_an_install(tmp_path, monkeypatch):
    """``pip install --target DIR`` + PYTHONPATH (how the GPU machine gets rsl_rl): its files are a
    library's, named by its distribution, not the user's."""
    target = tmp_path / "site"
    (target / "somelib").mkdir(parents=True)
    (target / "somelib" / "__init__.py").write_text("def f():\n    return 1\n")
    dist = target / "somelib-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: somelib\nVersion: 1.2.3\n")
    (dist / "top_level.txt").write_text("somelib\n")
    (dist / "RECORD").write_text("")
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.setattr(sites, "_SITE_ROOTS", sites._site_roots())
    sites._cache.clear()
    sites.library_of.cache_clear()
    sites._distribution.cache_clear()
    try:
        f = str(target / "somelib" / "__init__.py")
        assert sites.kind_of(f) == "library"
        assert sites.library_of(f) == "somelib 1.2.3"
        assert sites.kind_of(__file__) == "user"
    finally:
        sites._cache.clear()
        sites.library_of.cache_clear()
        sites._distribution.cache_clear()
