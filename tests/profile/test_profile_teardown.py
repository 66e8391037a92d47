"""Syncs after the program's last step are teardown, like those before its first are setup: neither
is a per-step cost. The per-step rate is taken over the closed step intervals (step start to the
next step start), the same intervals as the step times."""
import torch

from perfkit.session import Session


class Env:
    num_envs = 8

    def __init__(self):
        self.x = torch.zeros(8)

    def step(self, a):
        self.x.add_(a)
        return self.x


def test_a_sync_after_the_loop_is_teardown_not_per_step():
    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=2) as s:
        for _ in range(20):
            env.step(a)
        total = env.x.sum().item()  # after training: teardown
    assert total == 160.0
    run = s.run
    assert run.findings_of("sync") == []
    assert [(d["op"], d["count"]) for d in run.extra["teardown_syncs"]] == [(".item()", 1)]
    assert run.syncs_per_step == 0


def test_a_sync_every_step_stays_one_per_step_with_the_last_one_in_the_open_interval():
    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=2) as s:
        for _ in range(20):
            env.step(a)
            env.x.sum().item()  # every step, the last one after the last step's start
    (f,) = s.run.findings_of("sync")
    assert f.count == 20 and f.per_step == 1.0
    assert "teardown_syncs" not in s.run.extra
