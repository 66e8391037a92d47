"""The comm collector in one process (gloo, a world of 1): collectives and Work.wait() as segment comm,
counted per timed step, setup and teardown kept apart, a wait never a sync finding, a real sync inside
comm still one, DDP's reducer statistics, and every hook removed afterwards."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.distributed as dist
from torch.distributed import all_reduce as imported_all_reduce  # an alias made before any session
from torch.distributed import distributed_c10d as c10d

import perfkit
from perfkit.profile.session import Session


class ToyEnv:
    num_envs = 8

    def __init__(self):
        self.obs = torch.zeros(self.num_envs, 4)

    def step(self, actions):
        self.obs.add_(actions)
        return self.obs


@pytest.fixture
def pg_cleanup():
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _ops(run):
    return run.dist["comm"]["ops"]


def test_collectives_waits_setup_and_teardown(pg_cleanup):
    originals = (dist.all_reduce, c10d.all_reduce, c10d.Work.wait, dist.init_process_group, dist.all_gather)
    env = ToyEnv()
    t = torch.ones(4)
    steps = 14
    with Session(command=["toy"], warmup_steps=2) as s:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # the hook reads the backend
        dist.broadcast(t, src=0)  # before the first step: setup
        for _ in range(steps):
            env.step(t)  # the boundary: what follows belongs to this step
            dist.all_reduce(t)
            imported_all_reduce(t)  # the alias is hooked too
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            got = [None]
            dist.all_gather_object(got, 1.5)  # calls all_gather inside: one call, of all_gather_object
            with perfkit.segment("comm"):
                t.sum().item()  # a real (here would-be) sync inside comm: a sync finding in segment comm
        dist.barrier()  # after the last step: teardown
        dist.destroy_process_group()
    run = s.run
    d = run.dist
    assert (d["rank"], d["world_size"], d["backend"], d["device"]) == (0, 1, "gloo", "cpu")
    comm = d["comm"]
    timed = comm["timed_steps"]
    assert timed == len(run.step_times_ms) - 1 > 5  # the last step is no complete step
    ops = _ops(run)
    # per complete step: exactly what the loop body makes
    for op, per_step in (("all_reduce", 3), ("all_gather_object", 1)):
        assert ops[op]["calls_per_step"] == per_step, op
    assert "all_gather" not in ops
    assert ops["all_reduce"]["async_per_step"] == 1 == ops["all_reduce"]["waits_per_step"]
    assert ops["all_reduce"]["bytes_per_step"] == 3 * 16
    assert ops["broadcast"]["calls"] == {"setup": 1}
    assert ops["barrier"]["calls"] == {"teardown": 1}
    assert ops["all_reduce"]["calls"]["teardown"] == 3 and ops["all_reduce"]["calls"]["warmup"] == 3 * 2
    assert comm["host_ms_per_step"] == pytest.approx(comm["call_ms_per_step"] + comm["wait_ms_per_step"])
    assert comm["host_ms_per_step"] > 0
    seg = run.segments["comm"]
    assert seg.calls_per_step > 0 and seg.cpu_ms_per_step > 0
    # a Work.wait() is communication, not a sync; the .item() inside comm is
    assert not [f for f in run.findings if "wait" in f.op.lower()]
    syncs = [f for f in run.findings if f.kind == "sync"]
    assert [(f.op, f.segment) for f in syncs] == [(".item()", "comm")]
    # every hook is gone
    assert (dist.all_reduce, c10d.all_reduce, c10d.Work.wait, dist.init_process_group, dist.all_gather) == originals
    assert imported_all_reduce is c10d.all_reduce and globals()["imported_all_reduce"] is c10d.all_reduce


@pytest.mark.parametrize("manual", [False, True], ids=["env-step", "perfkit.step"])
def test_two_all_reduces_per_step_read_exactly_two(pg_cleanup, manual):
    """Issue 21.2: the last step's collectives are not lost while it counts in the divisor."""
    env = ToyEnv()
    t = torch.ones(256)
    with Session(command=["toy"], warmup_steps=3) as s:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        for _ in range(23):
            if manual:
                perfkit.step(num_envs=8)
            env.step(t[:4])
            dist.all_reduce(t)
            dist.all_reduce(t)
        got = [None]
        dist.all_gather_object(got, 0.5)  # the script's closing exchange: teardown, or the last step's
        dist.destroy_process_group()
    comm = s.run.dist["comm"]
    assert comm["timed_steps"] == 18  # 20 steady, the first sampled (untimed), the last incomplete
    assert comm["calls_per_step"] == 2.0 and comm["ops"]["all_reduce"]["calls_per_step"] == 2.0
    assert comm["bytes_per_step"] == 2 * 256 * 4
    assert "all_gather_object" not in comm or comm["ops"]["all_gather_object"].get("calls_per_step", 0) == 0


def test_a_wait_on_work_made_before_the_session_is_comm_wait(pg_cleanup):
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.ones(4)
    early = [dist.all_reduce(t, async_op=True) for _ in range(20)]
    env = ToyEnv()
    with Session(command=["toy"], warmup_steps=1) as s:
        for w in early:
            env.step(t)
            w.wait()
    ops = _ops(s.run)
    assert set(ops) == {"Work.wait"}
    assert ops["Work.wait"]["waits_per_step"] > 0 and ops["Work.wait"]["calls_per_step"] == 0
    assert s.run.dist["backend"] == "gloo"  # the group existed before the session: read at its end


@pytest.mark.parametrize("collected", [False, True], ids=["alive", "collected-before-the-end"])
def test_ddp_buckets_are_accounted_from_the_reducer(pg_cleanup, collected):
    env = ToyEnv()
    with Session(command=["toy"], warmup_steps=2) as s:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Linear(16, 4)))
        x = torch.randn(32, 4)
        for i in range(10):  # fewer forwards than DDP's first sampled read-out: the end reads the statistics
            env.step(torch.zeros(4))
            model(x).pow(2).mean().backward()
            with torch.no_grad():
                model(x)  # no gradient: no bucket all-reduce follows, not counted
        if collected:  # as a program does before destroying the group: the statistics outlive the module
            del model
            gc.collect()
            dist.destroy_process_group()
    run = s.run
    ddp = run.dist["ddp"]
    timed = run.dist["comm"]["timed_steps"] if "comm" in run.dist else len(run.step_times_ms)
    assert ddp["modules"] == 1 and ddp["buckets"] >= 1 and sum(ddp["bucket_bytes"]) == ddp["total_parameter_size_bytes"]
    assert ddp["forwards_per_step"] == 1
    assert ddp["comm_ms_per_backward"] >= 0 and ddp["comm_ms_per_step"] == pytest.approx(
        ddp["comm_ms_per_backward"] * ddp["forwards_per_step"], rel=1e-3, abs=1e-6)
    assert 0 <= ddp["exposed_comm_ms_per_step"] <= ddp["comm_ms_per_step"] + 1e-9
    assert "reducer" in ddp["accounting"]
    assert run.segments["learner"].cpu_ms_per_step > 0  # the backward, buckets included
    assert torch.nn.parallel.DistributedDataParallel.forward.__qualname__ == "DistributedDataParallel.forward"


def test_a_plain_run_is_rank_0_of_1_without_comm():
    env = ToyEnv()
    with Session(command=["toy"], warmup_steps=1) as s:
        for _ in range(5):
            env.step(torch.zeros(4))
    d = s.run.dist
    assert (d["rank"], d["world_size"], d["backend"], d["launcher"]) == (0, 1, None, None)
    assert "comm" not in d and "ddp" not in d and "comm" not in s.run.segments


def test_launch_environment_names_the_rank(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-7")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    with Session(command=["toy"], warmup_steps=0) as s:
        ToyEnv().step(torch.zeros(4))
    d = s.run.dist
    assert (d["rank"], d["local_rank"], d["world_size"], d["launcher"], d["run_id"], d["master"]) == \
        (1, 1, 2, "torchrun", "job-7", "10.0.0.1:29500")
    assert d["visible_devices"] == "3,5" and d["physical_gpu"] is None  # the env stepped on the CPU
