"""Session: step detection, segments, allocations, loops, timing, hook removal, the record."""
from __future__ import annotations

import json
import sys
import threading

import pytest
import torch

import perfkit
from perfkit.collectors import segments
from perfkit.collectors import hub, torch_sync
from perfkit.config import Config
from perfkit.record import Run
from perfkit.profile.session import Session

from _helpers import line_of, load, script


def _snapshot():
    import builtins
    import logging

    from torch.nn.modules import module as M
    from torch.optim import optimizer as O

    snap = dict(torch_sync.originals())
    snap.update({"print": builtins.print, "Logger._log": logging.Logger._log, "Tensor.backward": torch.Tensor.backward,
                 "Optimizer.zero_grad": torch.optim.Optimizer.zero_grad, "Module.zero_grad": torch.nn.Module.zero_grad})
    try:
        import warp as wp

        from perfkit.collectors import warp_sync

        snap.update(warp_sync.originals())
        snap["wp.to_torch"] = wp.to_torch
        snap["wp.launch"] = wp.launch
        snap["wp.capture_launch"] = wp.capture_launch
    except ImportError:
        pass
    state = {
        "profile": sys.getprofile(), "trace": sys.gettrace(), "on_transition": segments.on_transition,
        "fwd_hooks": len(M._global_forward_hooks), "fwd_pre_hooks": len(M._global_forward_pre_hooks),
        "opt_pre": len(O._global_optimizer_pre_hooks), "opt_post": len(O._global_optimizer_post_hooks),
        "sinks": len(hub.sinks), "active": perfkit.profile.session.active(),
    }
    return snap, state


def test_toy_env_exact_counts_lines_and_per_step():
    toy = load("toy_env")
    with Session(command=["toy"], warmup_steps=2) as s:
        toy.main(10)
    run = s.run
    assert run.status == "complete"
    assert run.total_steps == 10 and run.steps == 8 and run.num_envs == 16
    path = toy.__file__
    by = {(f.kind, f.op): f for f in run.findings}
    b = by[("sync", "bool(t)")]
    # perfkit.run/2: count is over the 8 steady-state steps, per_step = count / steps
    assert (b.line, b.count, b.per_step, b.function) == (line_of(path, "if done.any():"), 8, 1.0, "step")
    it = by[("sync", ".item()")]
    assert (it.line, it.count, it.per_step, it.function) == (line_of(path, "total += r.mean().item()"), 8, 1.0, "main")
    assert it.would_sync_on_gpu and it.path.endswith("toy_env.py") and "item()" in it.code
    z = by[("alloc", "torch.zeros")]
    assert (z.line, z.per_step, z.bytes) == (line_of(path, "extra = torch.zeros"), 1.0, 64 * 8)  # bytes over the steady steps
    loops = run.findings_of("loop")
    # per step: the body's iterations (num_envs), and the torch ops each iteration issues (one __setitem__)
    assert [(f.line, f.per_step, f.function) for f in loops] == [(line_of(path, "for i in range(self.num_envs)"), 16.0, "step")]
    assert run.extra["loop_ops"] == {loops[0].site: 1.0}
    # no allocation is reported for in-place writes
    assert not any(f.kind == "alloc" and f.line == line_of(path, "self.obs.add_(0.1)") for f in run.findings)
    assert run.env["sim_dt"] == 0.01 and run.env["decimation"] == 2 and run.env["obs_dim"] == 4
    assert run.sps > 0 and run.step_ms["p50"] > 0 and len(run.step_times_ms) == run.steps - len(
        [i for i in run.sampling["steps"] if i > 2])


def test_segments_by_rule_and_override():
    mod = load("segments_env")
    path = mod.__file__
    with Session(warmup_steps=3) as s:
        mod.main(10)
    run = s.run
    assert run.num_envs == 8 and run.extra["step_detection"] == "auto"
    allocs = {f.line: f for f in run.findings_of("alloc")}
    assert allocs[line_of(path, "# <- reward")].segment == "reward"
    assert allocs[line_of(path, "# <- decorated")].segment == "policy"
    assert allocs[line_of(path, "# <- logging")].segment == "logging"
    segs = run.segments
    for name in ("physics", "policy", "reward", "learner", "logging", "custom", "other"):
        assert name in segs, (name, list(segs))
        assert segs[name].cpu_ms_per_step > 0, name
    assert "segments_env.Policy" in run.extra["policy_classes"][0]
    # the discovered functions were wrapped, so steady state kept its segments after the window closed
    assert segs["reward"].calls_per_step == pytest.approx(1.0)
    assert segs["physics"].calls_per_step == pytest.approx(1.0)
    assert segs["custom"].calls_per_step == pytest.approx(1.0)


def test_segment_rules_keep_policy_and_learner_apart():
    mod = load("segments_env")
    with Session(warmup_steps=2) as s:
        mod.main(6)
    # the forward under no_grad is policy; the same module with grad on is learner/other, never policy
    pol_calls = s.run.segments["policy"].calls_per_step
    # steady steps 4..6 (3 is sampled): 2 + 2 + 0 — the last step ends when its env.step returns, so the
    # policy helper after it is not the step's (its time never was; its entry no longer counts either)
    assert pol_calls == pytest.approx(4 / 3, rel=1e-3)


def test_segment_names_rules():
    sf = segments.segment_for_name
    assert sf("compute_reward") == "reward" and sf("_reward_alive") == "reward"
    assert sf("simulate") == "physics" and sf("step_physics") == "physics"
    assert sf("log_metrics") == "logging" and sf("logger") == "logging"
    assert sf("log_prob") is None and sf("logits") is None and sf("catalog") is None
    assert sf("compute_obs") is None


def test_segment_api_nests_innermost_wins_and_validates():
    assert segments.current() == "other"
    with perfkit.segment("a"):
        with perfkit.segment("b"):
            assert segments.current() == "b"
        assert segments.current() == "a"
    assert segments.current() == "other"
    with pytest.raises(ValueError):
        perfkit.segment("")


def test_manual_step_marks_override_auto_detection():
    toy = load("toy_env")
    env = toy.ToyEnv(num_envs=8)
    a = torch.zeros(8, 2)
    with Session(warmup_steps=1) as s:
        for _ in range(6):
            perfkit.step()
            env.step(a)
            env.step(a)  # two env steps per marked step
    assert s.run.extra["step_detection"] == "manual"
    assert s.run.total_steps == 6
    f = [f for f in s.run.findings if f.op == "bool(t)"][0]
    assert f.count == 10 and f.per_step == 2.0  # over the 5 steady steps (perfkit.run/2)


def test_step_fn_option_and_wrapped_envs_count_once():
    toy = load("toy_env")

    class Wrapper:
        def __init__(self, env):
            self.env = env
            self.num_envs = env.num_envs

        def step(self, a):
            return self.env.step(a)

    env = Wrapper(toy.ToyEnv(num_envs=8))
    a = torch.zeros(8, 2)
    with Session(warmup_steps=0) as s:
        for _ in range(5):
            env.step(a)
    assert s.run.total_steps == 5
    sys.modules["_pk_toy_for_stepfn"] = toy
    try:
        env2 = toy.ToyEnv(num_envs=8)
        with Session(step_fn="_pk_toy_for_stepfn:ToyEnv.compute_reward", warmup_steps=0) as s2:
            for _ in range(3):
                env2.step(a)
        assert s2.run.total_steps == 3
        assert s2.run.extra["step_detection"].startswith("--step-fn")
    finally:
        del sys.modules["_pk_toy_for_stepfn"]
    with pytest.raises(ValueError, match="step-fn"):
        with Session(step_fn="no_such_module_xyz:Env.step"):
            pass


def test_objects_without_integer_num_envs_are_not_steps():
    class NotEnv:
        num_envs = "8"

        def step(self):
            return 1

    class Opt:
        def step(self):
            return 1

    with Session(warmup_steps=0) as s:
        for _ in range(4):
            NotEnv().step()
            Opt().step()
    assert s.run.total_steps == 0
    assert any("no env step was detected" in n for n in s.run.extra["notes"])


def test_every_hook_is_removed_after_a_session_and_after_a_crash():
    before = _snapshot()
    toy = load("toy_env")
    mod = load("segments_env")
    with Session(warmup_steps=2):
        toy.main(6)
        mod.main(5)
    assert _snapshot() == before
    with pytest.raises(RuntimeError):
        with Session(warmup_steps=2) as s:
            toy.main(3)
            raise RuntimeError("crash")
    assert s.run.status == "partial"
    assert _snapshot() == before
    assert torch.Tensor.item is before[0]["Tensor.item"]
    # the wrapped user classes got their own methods back too
    assert "step" in vars(toy.ToyEnv) and not hasattr(vars(toy.ToyEnv)["step"], "__perfkit_wrapped__")
    assert not hasattr(vars(mod.Env)["compute_reward"], "__perfkit_wrapped__")
    assert not hasattr(vars(mod.Policy)["forward"], "__perfkit_wrapped__")


def test_sessions_do_not_nest():
    with Session():
        with pytest.raises(RuntimeError, match="already active"):
            with Session():
                pass


def test_sync_in_worker_thread_inside_a_session():
    toy = load("toy_env")
    env = toy.ToyEnv(num_envs=8)
    a = torch.zeros(8, 2)
    x = torch.ones(2)

    def worker():
        for _ in range(3):
            x.sum().item()  # <- worker sync

    with Session(warmup_steps=0) as s:
        env.step(a)  # syncs before the first step are setup, kept apart: start the worker after it
        t = threading.Thread(target=worker, name="stats-thread")
        t.start()
        for _ in range(3):
            env.step(a)
        t.join()
    f = [f for f in s.run.findings if f.thread == "stats-thread"]
    assert len(f) == 1 and f[0].op == ".item()" and f[0].line == line_of(__file__, "# <- worker sync") and f[0].count == 3


def test_record_round_trips_and_has_timeline(tmp_path):
    toy = load("toy_env")
    with Session(command=["toy.py"], warmup_steps=2, config=Config(timeline_steps=3)) as s:
        toy.main(12)
    p = s.run.save(tmp_path / "r.json")
    back = Run.load(p)
    assert back.schema == "perfkit.run/3" and back.command == ["toy.py"]
    tl = back.timeline.spans
    # the first timeline_steps steady steps, then every timing_every-th (7) over the whole run: steady step 8 = step 10
    assert {e["step"] for e in tl} == {3, 4, 5, 10}
    assert len(back.timeline.step_starts_ms) == 12  # every step's start: export-trace covers the whole run
    assert all(set(e) == {"step", "segment", "start_ms", "dur_ms", "gpu"} for e in tl)
    assert all(e["dur_ms"] >= 0 for e in tl)
    d = json.loads(p.read_text())
    assert d["memory"]["host_peak_rss_bytes"] > 0
    assert d["memory"]["host_rss_bytes"] > 0
    assert back.peak_memory() == (d["memory"]["host_peak_rss_bytes"], "peak host RSS")  # not the current RSS
    assert back.machine.get("python")


def test_segment_cpu_times_add_up_to_step_time():
    mod = load("segments_env")
    with Session(warmup_steps=2) as s:
        mod.main(20)
    run = s.run
    seg_sum = sum(v.cpu_ms_per_step for v in run.segments.values())
    assert seg_sum == pytest.approx(run.step_ms["mean"], rel=0.02)


def test_config_segments_and_step_fn(tmp_path):
    from perfkit import config as C

    (tmp_path / "pyproject.toml").write_text(
        '[tool.perfkit]\nwarmup_steps = 1\nsegments = {"compute_reward" = "physics"}\nmax_syncs_per_step = 0\n'
        '[tool.perfkit.lint]\nhot = ["x"]\n'
    )
    cfg = C.load(tmp_path)
    assert cfg.warmup_steps == 1 and cfg.segment_names == {"compute_reward": "physics"} and cfg.max_syncs_per_step == 0
    mod = load("segments_env")
    with Session(config=cfg) as s:
        mod.main(5)
    rew = [f for f in s.run.findings_of("alloc") if f.line == line_of(mod.__file__, "# <- reward")]
    assert rew and rew[0].segment == "physics"
    (tmp_path / "pyproject.toml").write_text("[tool.perfkit]\nwarmup_steps = -1\n")
    with pytest.raises(C.ConfigError, match="warmup_steps"):
        C.load(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.perfkit]\nbogus = 1\n")
    with pytest.raises(C.ConfigError, match="bogus"):
        C.load(tmp_path)


def test_per_env_loops_of_every_shape_and_not_loops_over_terms():
    mod = load("loops_env")
    path = mod.__file__
    env = mod.LoopEnv(32)
    with Session(warmup_steps=1) as s:
        for _ in range(5):
            env.step(None)
    got = {(f.line, f.op): f.per_step for f in s.run.findings_of("loop")}
    assert got == {
        (line_of(path, "# <- comprehension"), "comprehension over envs"): pytest.approx(33, abs=1),
        (line_of(path, "# <- while"), "while-loop over envs"): 32,
        (line_of(path, "# <- outer"), "for-loop over envs"): 32,
        # entered twice a step, num_envs/2 iterations each: still one loop over (half) the envs
        (line_of(path, "# <- half-batch"), "for-loop over envs"): 32,
    }
    # a helper run num_envs times a step whose own loop goes over 3 arguments is not a per-env loop
    assert not any(f.line == line_of(path, "# <- not per env: 3 iterations per entry") for f in s.run.findings_of("loop"))
    # nor a loop over a dict's keys (however many), nor one whose fixed trip count is no fraction of num_envs
    # (listed in `got` above: the dict loop, and the 17-trip loop at 32 envs, are not there)


def test_no_loop_findings_below_eight_envs():
    mod = load("loops_env")
    env = mod.LoopEnv(6)
    with Session(warmup_steps=1) as s:
        for _ in range(5):
            env.step(None)
    assert not s.run.findings_of("loop")


def test_logging_methods_first_called_after_discovery_are_logging_and_env_fields():
    """``log_iteration`` / ``_log_metrics`` first run after the warm-up window closed still get the
    logging segment (the user modules are scanned when it closes); ``log_prob`` / ``logits`` /
    ``logsumexp`` are math, not logging. The env block records max_episode_steps and device."""
    mod = load("late_log_env")
    path = mod.__file__
    with Session(warmup_steps=2, count_cpu_tensors=True) as s:
        mod.main(24)
    run = s.run
    syncs = {f.line: f for f in run.findings_of("sync")}
    assert syncs[line_of(path, "# <- iteration")].segment == "logging"
    assert syncs[line_of(path, "# <- metrics")].segment == "logging"
    assert syncs[line_of(path, "# <- math")].segment == "other"
    assert run.segments["logging"].calls_per_step > 0
    assert mod.Trainer.logits.__name__ == "logits" and not hasattr(mod.Trainer.logits, "__perfkit_segment__")
    assert run.env["max_episode_steps"] == 500 and run.env["device"] == "cpu"


def test_every_method_of_a_logger_class_is_logging():
    """A logger's log() once per iteration after the update (first called after the warm-up window),
    its methods named like reward or learner work, and a subclass not named like a logger."""
    mod = load("logger_classes")
    path = mod.__file__
    with Session(warmup_steps=3, count_cpu_tensors=True) as s:
        mod.main(40)
    syncs = {f.line: f for f in s.run.findings_of("sync")}
    for mark in ("every step", "reward-named", "update-named", "log", "subclass"):
        f = syncs[line_of(path, f"# <- {mark}")]
        assert f.segment == "logging", (mark, f.segment)
    assert s.run.segments["logging"].syncs_per_step == pytest.approx(1 + 4 / 8, abs=2 / s.run.steps)
