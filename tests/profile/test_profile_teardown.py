"""Syncs after the program's last step are teardown, like those before its first are setup: neither
is a per-step cost. The per-step rate is taken over the closed step intervals (step start to the
next step start), the same intervals as the step times."""
import torch

from perfkit.profile.session import Session

from _helpers import AddEnv, load_file


Env = AddEnv  # 8 envs, a step of one in-place add


def test_a_sync_after_the_loop_is_teardown_not_per_step():
    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=2) as s:
        for _ in range(20):
            env.step(a)
        total = env.x.sum().item()  # after training: teardown
    assert total == 160.0
    run = s.run
    assert run.findings_of("sync") == []
    assert [(d["op"], d["count"]) for d in run.outside_steps.teardown] == [(".item()", 1)]
    assert run.syncs_per_step == 0


def test_a_sync_every_step_stays_one_per_step_with_the_last_one_in_the_open_interval():
    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=2) as s:
        for _ in range(20):
            env.step(a)
            env.x.sum().item()  # every step, the last one after the last step's start
    (f,) = s.run.findings_of("sync")
    assert f.count == 18 and f.per_step == 1.0  # the 18 steady steps (perfkit.run/2: warm-up not counted)
    assert not s.run.outside_steps.teardown


_REWARD_MODULE = '''
import torch

def compute_reward(x):
    return x * 2.0

class Env:
    num_envs = 8

    def __init__(self):
        self.x = torch.zeros(8)

    def compute_reward(self):
        return self.x + 1.0

    def step(self, a):
        self.x.add_(a)
        compute_reward(self.x)
        return self.compute_reward()
'''


def test_a_session_that_ends_during_warm_up_leaves_nothing_wrapped(tmp_path):
    """The discovery window remembers name-ruled functions (compute_reward) to wrap when it closes; a
    session that ends before that must not wrap them on its way out."""
    path = tmp_path / "pk_warmup_leak_mod.py"
    path.write_text(_REWARD_MODULE)
    mod = load_file(path, "pk_warmup_leak_mod")
    fn, method, step = mod.compute_reward, mod.Env.__dict__["compute_reward"], mod.Env.__dict__["step"]
    env, a = mod.Env(), torch.ones(8)
    with Session(warmup_steps=50) as s:
        for _ in range(3):
            env.step(a)
    assert s.run.total_steps == 3
    assert mod.compute_reward is fn and mod.Env.__dict__["compute_reward"] is method and mod.Env.__dict__["step"] is step
    assert not hasattr(mod.compute_reward, "__perfkit_segment__")
