"""What perfkit's default instrumentation costs: interleaved A/B of one training-style loop with and
without a profiling session (what ``perfkit profile`` wraps a script in).

    python benchmarks/overhead.py                         # CPU here: self-contained torch env, 256 envs
    python benchmarks/overhead.py --env factory --num-envs 256 4096 --device cuda   # the H200 runs
    python benchmarks/overhead.py --json out.json

The loop: a batched env (``perfkit.envs:make_env`` — ``--env factory`` — or a self-contained torch
env with decimation, reward, terminations and masked resets — ``--env torch``) driven by a 2x256 MLP
policy under ``no_grad``, the shape of a PPO rollout. Each *round* runs the same number of steps once
plain (A) and once inside a :class:`perfkit.profile.session.Session` (B), after the session's warm-up
(discovery window, sampled steps) so both time steady state; rounds alternate AB / BA so drift hits
both arms equally; each timed span starts after ``gc.collect()``, so a full collection of the garbage
the session's own start left behind does not land in one arm only. The figure is the median over rounds of the ratio SPS_B / SPS_A; overhead =
1 - median ratio; the ratio of each arm's best span is reported beside it (on a shared CPU machine
other processes only ever add time, so the best spans are the least disturbed). On a GPU both arms end their timed span with ``torch.cuda.synchronize()``.

This is a benchmark, not a test: it prints a table and (``--json``) the numbers; it never asserts
(``--max-overhead`` makes it exit 1 above a threshold, for CI that wants a gate).

It is the *env-only* figure: the step loop alone, in one process, with no start-up, no record writing
and no learner. The *whole-run* figure (the same training script in fresh processes, plainly, under
``perfkit profile`` and under ``torch.profiler``, each run's own SPS line and wall time) is
``perfkit overhead SCRIPT [ARGS...]`` (:mod:`perfkit.overhead.measure`); ``scripts/gpu/overhead.py`` puts
the two side by side on the H200.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from typing import Any, Callable


# ---- the self-contained torch env ------------------------------------------------------------------
class TorchEnv:
    """A batched point-mass locomotion toy: sync-free, allocation-free step (preallocated buffers)."""

    def __init__(self, num_envs: int, device: str = "cpu", obs_dim: int = 32, act_dim: int = 8, decimation: int = 4, seed: int = 0):
        import torch

        g = torch.Generator(device="cpu").manual_seed(seed)
        self.num_envs = num_envs
        self.obs_dim, self.act_dim, self.decimation = obs_dim, act_dim, decimation
        self.sim_dt = 0.005
        self.device = torch.device(device)
        n, d = num_envs, obs_dim // 2
        self.pos = torch.randn(n, d, generator=g).to(self.device)
        self.vel = torch.zeros(n, d, device=self.device)
        self.target = torch.randn(n, d, generator=g).to(self.device)
        self.act_map = (torch.randn(act_dim, d, generator=g) * 0.1).to(self.device)
        self.force = torch.zeros(n, d, device=self.device)
        self.obs = torch.zeros(n, obs_dim, device=self.device)
        self.reward = torch.zeros(n, device=self.device)
        self.done = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.steps = torch.zeros(n, dtype=torch.int32, device=self.device)
        self._tmp = torch.zeros(n, d, device=self.device)
        self._dist = torch.zeros(n, device=self.device)
        self.info: dict[str, Any] = {}

    def reset(self):
        return self.obs

    def _physics_substep(self) -> None:
        import torch

        torch.mul(self.pos, -0.5, out=self._tmp)
        self._tmp.add_(self.force)
        self.vel.add_(self._tmp, alpha=self.sim_dt)
        self.vel.mul_(0.99)
        self.pos.add_(self.vel, alpha=self.sim_dt)
        self.pos.clamp_(-5.0, 5.0)

    def compute_reward(self) -> None:
        import torch

        torch.sub(self.pos, self.target, out=self._tmp)
        torch.linalg.vector_norm(self._tmp, dim=1, out=self._dist)
        torch.neg(self._dist, out=self.reward)
        self.reward.add_(1.0)

    def step(self, actions):
        import torch

        with torch.no_grad():
            torch.matmul(actions.clamp(-1, 1), self.act_map, out=self.force)
            for _ in range(self.decimation):
                self._physics_substep()
            self.compute_reward()
            self.steps.add_(1)
            torch.logical_or(self._dist < 0.1, self.steps >= 500, out=self.done)
            m = self.done.unsqueeze(1)
            self.pos.masked_fill_(m, 0.0)
            self.vel.masked_fill_(m, 0.0)
            self.steps.masked_fill_(self.done, 0)
            self.obs[:, : self.pos.shape[1]].copy_(self.pos)
            self.obs[:, self.pos.shape[1]:].copy_(self.vel)
        return self.obs, self.reward, self.done, self.info


def make_loop(env_kind: str, num_envs: int, device: str, name: str) -> tuple[Callable[[int], None], Any, str]:
    if env_kind == "manager":
        return _manager_loop(num_envs, device)
    if env_kind == "factory":
        from perfkit.envs import make_env

        env = make_env(name, num_envs, device=device)
        label = f"perfkit.envs:make_env({name!r}, backend={getattr(env, 'backend', '?')})"
    else:
        env = TorchEnv(num_envs, device=device)
        label = "benchmarks/overhead.py:TorchEnv"
    return _rollout(env, env.reset(), env.obs_dim, env.act_dim, 256, squash=True), env, label


def _rollout(env: Any, obs: Any, n_obs: int, n_act: int, width: int, squash: bool = False,
             select: Callable[[Any], Any] = lambda o: o) -> Callable[[int], None]:
    """``loop(n)``: ``n`` env steps driven by a 2 x ``width`` ELU MLP under ``no_grad`` (its input picked
    from the observation by ``select``; ``squash``: tanh on the actions), the shape of a PPO rollout."""
    import torch

    policy = torch.nn.Sequential(
        torch.nn.Linear(n_obs, width), torch.nn.ELU(), torch.nn.Linear(width, width), torch.nn.ELU(),
        torch.nn.Linear(width, n_act),
    ).to(select(obs).device)
    state = {"obs": obs}

    def loop(n: int) -> None:
        o = state["obs"]
        for _ in range(n):
            with torch.no_grad():
                a = policy(select(o))
                if squash:
                    a = torch.tanh(a)
            o, r, done, info = env.step(a)
        state["obs"] = o

    return loop


def _manager_loop(num_envs: int, device: str) -> tuple[Callable[[int], None], Any, str]:
    """The rollout half of ``examples/manager_env/train_rsl_rl.py``: the Isaac-Lab-style manager env
    behind its rsl_rl wrapper (TensorDict observations), an ELU MLP policy under ``no_grad`` — what
    rsl_rl's runner does per env step, without the learner."""
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    from manager_env.env import ManagerBasedRLEnv
    from manager_env.env_cfg import ant_velocity_env_cfg
    from manager_env.wrapper import RslRlVecEnvWrapper

    backend = "mjwarp" if device.startswith("cuda") else "mujoco"
    env = RslRlVecEnvWrapper(ManagerBasedRLEnv(ant_velocity_env_cfg(num_envs, backend=backend, device=device)))
    obs = env.get_observations()
    loop = _rollout(env, obs, obs["policy"].shape[1], env.num_actions, 128, select=lambda o: o["policy"])
    return loop, env, f"examples/manager_env (rsl_rl wrapper, {backend})"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def measure(env_kind: str = "torch", num_envs: int = 256, device: str = "cpu", rounds: int = 9, steps: int = 200,
            name: str = "ant", warmup: int = 20, clock: str = "wall", warm_steps: int = 10,
            with_control: bool = False) -> dict[str, Any]:
    from perfkit.profile.session import Session

    if clock == "thread" and device.startswith("cuda"):
        raise ValueError("--clock thread measures host CPU time only; use wall time on a GPU")
    now = time.thread_time if clock == "thread" else time.perf_counter
    loop, env, label = make_loop(env_kind, num_envs, device, name)
    loop(warmup)  # compile / lazy init, outside both arms
    _sync(device)
    session_warm = warm_steps  # untimed in both arms: the session warm-up (5 steps, samples at 2-3) and a margin

    def arm(instrumented: bool, sham: bool = False) -> float:
        if instrumented:
            with Session(command=["benchmarks/overhead.py"]) as s:
                loop(session_warm)
                _sync(device)
                if sham:  # the control: a session entered and left the same way, its hooks taken off
                    from perfkit.collectors import segments
                    from perfkit.collectors import hub

                    segments.on_transition = None
                    s.patcher.undo()
                    if hub._patcher is not None:
                        hub._patcher.undo()
                gc.collect()  # both arms start their span with no garbage pending (see module doc)
                t0 = now()
                loop(steps)
                _sync(device)
                dt = now() - t0
            arm.last_run = s.run  # type: ignore[attr-defined]
        else:
            loop(session_warm)
            _sync(device)
            gc.collect()
            t0 = now()
            loop(steps)
            _sync(device)
            dt = now() - t0
        return steps * num_envs / dt

    ratios, sps_a, sps_b, control = [], [], [], []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        res = {}
        for inst in order:
            res[inst] = arm(inst)
        sps_a.append(res[False])
        sps_b.append(res[True])
        ratios.append(res[True] / res[False])
        if with_control:
            pair = (arm(False), arm(True, sham=True)) if r % 2 else tuple(reversed((arm(True, sham=True), arm(False))))
            control.append(pair[1] / pair[0])
    med = statistics.median(ratios)
    run = getattr(arm, "last_run", None)
    return {
        "env": label,
        "num_envs": num_envs,
        "device": device,
        "rounds": rounds,
        "clock": clock,
        "steps_per_arm": steps,
        "sps_plain_median": statistics.median(sps_a),
        "sps_profiled_median": statistics.median(sps_b),
        "ratio_median": med,
        "ratios": [round(r, 4) for r in ratios],
        "ratio_quartiles": [round(q, 4) for q in statistics.quantiles(ratios, n=4)] if len(ratios) > 1 else None,
        "overhead_pct": round((1 - med) * 100, 2),
        # robust to additive noise from other processes: best span of each arm
        "ratio_of_best": max(sps_b) / max(sps_a),
        "overhead_of_best_pct": round((1 - max(sps_b) / max(sps_a)) * 100, 2),
        "control_ratio_median": statistics.median(control) if control else None,
        "session_found_steps": bool(run and run.total_steps),
        "session_findings": len(run.findings) if run else None,
        "session_segments": list(run.segments) if run else None,
    }


# perfkit's parts switched off one at a time (``--variants``): ``[tool.perfkit]`` settings per variant
NO_SAMPLING = {"sample_steps": ()}
UNTIMED = {"timing_every": 10**9, "nvtx": "off"}  # no CUDA-event timed steps, no NVTX ranges
VARIANTS: dict[str, dict[str, Any]] = {
    "plain-again": {},  # a second plain span per round, no session: the noise floor of the ratios
    "warn-only": {},  # no session: torch's sync-debug warnings and perfkit's catcher alone (no count kept)
    "hooks": {"sync_source": "hooks"},  # a Python hook on every sync-prone op
    "auto": {"sync_source": "auto"},  # the default: on CUDA the runtime reports syncs, always-sync ops hooked
    "auto-nosample": {"sync_source": "auto", **NO_SAMPLING},
    "auto-untimed": {"sync_source": "auto", **NO_SAMPLING, **UNTIMED},
    "hooks-untimed": {"sync_source": "hooks", **NO_SAMPLING, **UNTIMED},
}


def measure_sources(env_kind: str, num_envs: int, device: str, rounds: int, steps: int, name: str = "ant",
                    sources: tuple[str, ...] = ("hooks", "auto"), warmup: int = 20, warm_steps: int = 10) -> dict[str, Any]:
    """The cost of each way of running perfkit, in one process (issue 23's diagnosis by cause): per round
    a plain span and one span under a session per variant (:data:`VARIANTS`: the two ways of counting
    syncs, then sampling, GPU timing and NVTX switched off in turn; what is left in ``*-untimed`` is the
    always-on hooks and the sync path), in a rotating order; the ratio of each to the round's plain span.
    The session's warm-up and its first sampled step run in ``warm_steps``; later sampled steps may fall
    in the span (``auto-nosample`` shows what they cost)."""
    from perfkit.config import Config
    from perfkit.record import EXTRA_SYNC_SOURCE
    from perfkit.profile.session import Session

    unknown = [v for v in sources if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}: one of {', '.join(VARIANTS)}")

    loop, env, label = make_loop(env_kind, num_envs, device, name)
    loop(warmup)
    _sync(device)

    gc_s = [0.0]
    gc_t0 = [0.0]

    def gc_clock(phase: str, info: dict) -> None:  # the time the collector runs inside a span
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - gc_t0[0]

    gc.callbacks.append(gc_clock)
    cpu_ms: dict[str, list[float]] = {}
    gc_ms: dict[str, list[float]] = {}

    def span(arm: str) -> float:
        loop(warm_steps)
        _sync(device)
        gc.collect()
        gc_s[0] = 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        loop(steps)
        _sync(device)
        dt = time.perf_counter() - t0
        cpu_ms.setdefault(arm, []).append(1e3 * (time.process_time() - c0) / steps)
        gc_ms.setdefault(arm, []).append(1e3 * gc_s[0] / steps)
        return steps * num_envs / dt

    arms = ("plain", *sources)
    sps: dict[str, list[float]] = {a: [] for a in arms}
    counted: dict[str, Any] = {}
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        for a in order:
            if a in ("plain", "plain-again"):
                sps[a].append(span(a))
                continue
            if a == "warn-only":
                with _runtime_reports_only():
                    sps[a].append(span(a))
                continue
            with Session(command=["benchmarks/overhead.py"], config=Config(**VARIANTS[a])) as s:
                sps[a].append(span(a))
            counted[a] = {"source": s.run.extra.get(EXTRA_SYNC_SOURCE),
                          "syncs_per_step": round(sum(f.per_step for f in s.run.findings if f.kind == "sync"), 3),
                          "sampled_steps": list(s.run.sampling.get("steps", [])),
                          "gpu_timed_steps": s.run.extra.get("gpu_timed_steps")}
    gc.callbacks.remove(gc_clock)
    ratios = {a: [b / p for b, p in zip(sps[a], sps["plain"])] for a in sources}
    return {"env": label, "num_envs": num_envs, "device": device, "rounds": rounds, "steps_per_arm": steps,
            "sps_median": {a: statistics.median(v) for a, v in sps.items()},
            "wall_ms_per_step_median": {a: round(1e3 * num_envs / statistics.median(v), 3) for a, v in sps.items()},
            "cpu_ms_per_step_median": {a: round(statistics.median(v), 3) for a, v in cpu_ms.items()},
            "gc_ms_per_step_median": {a: round(statistics.median(v), 4) for a, v in gc_ms.items()},
            "ratio_median": {a: statistics.median(v) for a, v in ratios.items()},
            "ratios": {a: [round(x, 4) for x in v] for a, v in ratios.items()}, "counted": counted}


class _runtime_reports_only:
    """torch's sync-debug warnings turned on and caught the way a CUDA session catches them
    (:class:`perfkit.collectors.cuda_syncs.RuntimeSyncs`), with nothing done per report: what the
    runtime's reports cost without perfkit's bookkeeping."""

    def __enter__(self) -> "_runtime_reports_only":
        import torch

        from perfkit.collectors.cuda_syncs import RuntimeSyncs
        from perfkit.collectors.patches import Patcher

        self.patcher = Patcher()
        RuntimeSyncs(lambda frame: None, lambda: False, lambda: None).install(self.patcher, torch)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.patcher.undo()


# ---- deterministic estimate: wrapper calls per step x per-call cost ---------------------------------
_WRAPPERS = {  # (file suffix, function name) of perfkit's per-call wrappers -> the cost class to price it with
    ("perfkit/collectors/segments.py", "in_segment"): "segment",
    ("perfkit/collectors/segment_rules.py", "forward"): "policy",
    ("perfkit/collectors/steps.py", "step"): "step",
    ("perfkit/collectors/torch_sync.py", "__getitem__"): "getitem",
    ("perfkit/collectors/torch_sync.py", "__setitem__"): "getitem",
    ("perfkit/collectors/torch_sync.py", "copy_"): "tensor_method",
    ("perfkit/collectors/torch_sync.py", "to"): "tensor_method",
    ("perfkit/collectors/torch_sync.py", "cuda"): "tensor_method",
    ("perfkit/collectors/torch_sync.py", "where"): "tensor_method",
    ("perfkit/collectors/torch_sync.py", "tensor"): "tensor_method",
}


def _best_ns(fn: Callable[[], Any], n: int = 20000, repeat: int = 7) -> float:
    import timeit

    return min(timeit.repeat(fn, number=n, repeat=repeat)) / n * 1e9


def wrapper_costs() -> dict[str, float]:
    """Added ns per call of each wrapper kind (best of repeats: robust to a busy machine)."""
    import torch

    from perfkit.collectors import segments
    from perfkit.profile.session import Session

    class _E:
        num_envs = 8

        def step(self):
            return None

    class _M(torch.nn.Module):
        def forward(self, x):
            return x

    def f():
        return None

    e, m, x = _E(), _M(), torch.zeros(4, 4)
    w = segments.wrap(f, "physics")
    base = {"step": _best_ns(e.step), "segment": _best_ns(f), "getitem": _best_ns(lambda: x[:, 1:3]),
            "tensor_method": _best_ns(lambda: x.copy_(x))}
    with torch.no_grad():
        base["policy"] = _best_ns(lambda: m.forward(x))
    with Session() as s:
        for _ in range(12):
            with torch.no_grad():
                m(x)
            e.step()
        hooked = {"step": _best_ns(e.step), "segment": _best_ns(w), "getitem": _best_ns(lambda: x[:, 1:3]),
                  "tensor_method": _best_ns(lambda: x.copy_(x))}
        with torch.no_grad():
            hooked["policy"] = _best_ns(lambda: m.forward(x))
        assert s.discovery.step_classes, "the micro-benchmark env was not detected"
    return {k: max(0.0, hooked[k] - base[k]) for k in base}


def estimate(loop: Callable[[int], None], steps: int = 50) -> dict[str, Any]:
    """Wrapper calls per step of ``loop`` (cProfile call counts) priced with :func:`wrapper_costs`."""
    import cProfile
    import pstats

    from perfkit.profile.session import Session

    with Session():
        loop(12)
        pr = cProfile.Profile()
        pr.enable()
        loop(steps)
        pr.disable()
    calls: dict[str, float] = {}
    for (fn, _line, name), st in pstats.Stats(pr).stats.items():
        for (suffix, wname), kind in _WRAPPERS.items():
            if fn.endswith(suffix) and name == wname:
                calls[kind] = calls.get(kind, 0.0) + st[1] / steps
    costs = wrapper_costs()
    t0 = time.thread_time()
    loop(steps)
    plain_us = (time.thread_time() - t0) / steps * 1e6
    added_us = sum(calls.get(k, 0.0) * costs[k] for k in costs) / 1e3
    return {"calls_per_step": calls, "added_ns_per_call": {k: round(v, 1) for k, v in costs.items()},
            "added_us_per_step": round(added_us, 3), "plain_us_per_step": round(plain_us, 1),
            "estimated_overhead_pct": round(100 * added_us / (plain_us + added_us), 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/overhead.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--env", choices=("torch", "factory", "manager"), default="torch",
                   help="self-contained torch env, or perfkit.envs:make_env (the reference env)")
    p.add_argument("--name", default="ant", help="reference env name for --env factory (ant, humanoid)")
    p.add_argument("--num-envs", type=int, nargs="+", default=[256])
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--warm-steps", type=int, default=10,
                   help="untimed steps at the start of each arm (B: the session's warm-up and sampled steps run here)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: steadier numbers on a shared machine; 0 = torch's default)")
    p.add_argument("--clock", choices=("wall", "thread"), default=None,
                   help="wall: perf_counter; thread: this thread's CPU time, robust to other processes on a shared "
                        "CPU machine (needs --threads 1). Default: thread on CPU, wall on CUDA")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--max-overhead", type=float, default=None, help="exit 1 when the overhead (%%) is above this")
    p.add_argument("--control", action="store_true",
                   help="also run a control arm each round: a session entered and left the same way with its hooks "
                        "taken off, so the bias of switching sessions on and off shows (ratio ~1 when there is none)")
    p.add_argument("--estimate", action="store_true",
                   help="also price perfkit's wrapper calls per step (cProfile counts x best-of-N per-call cost): "
                        "a figure that a busy machine does not blur")
    p.add_argument("--sync-sources", "--variants", dest="sync_sources", nargs="+", default=None, metavar="VARIANT",
                   choices=sorted(VARIANTS),
                   help="instead of the A/B: plain against a session per variant, interleaved in one process: the sync "
                        "sources (hooks, auto) and auto/hooks with sampling, GPU timing and NVTX off (auto-nosample, "
                        "auto-untimed, hooks-untimed)")
    a = p.parse_args(argv)
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if a.threads:
        torch.set_num_threads(a.threads)
    results = []
    if a.sync_sources:
        for n in a.num_envs:
            res = measure_sources(a.env, n, device, a.rounds, a.steps, a.name, tuple(a.sync_sources),
                                  warm_steps=a.warm_steps)
            results.append(res)
            print(f"{res['env']} {n} envs on {device}: plain {res['sps_median']['plain']:,.0f} env-steps/s; "
                  + "; ".join(f"{k}: ratio {v:.4f} (rounds {res['ratios'][k]}, {res['counted'].get(k)})"
                              for k, v in res["ratio_median"].items()), flush=True)
            for k in ("wall_ms_per_step_median", "cpu_ms_per_step_median", "gc_ms_per_step_median"):
                print(f"  {k}: {res[k]}", flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"probe": "overhead-sync-sources", "results": results}, f, indent=1)
        return 0
    for n in a.num_envs:
        clock = a.clock or ("wall" if device.startswith("cuda") else ("thread" if a.threads == 1 else "wall"))
        res = measure(a.env, n, device, a.rounds, a.steps, a.name, clock=clock, warm_steps=a.warm_steps,
                      with_control=a.control)
        results.append(res)
        if a.estimate:
            loop, _, _ = make_loop(a.env, n, device, a.name)
            loop(20)
            res["estimate"] = est = estimate(loop)
            print(f"  estimate: {est['calls_per_step']} wrapper calls/step x {est['added_ns_per_call']} ns "
                  f"= {est['added_us_per_step']} us on a {est['plain_us_per_step']} us step "
                  f"-> {est['estimated_overhead_pct']:.2f}% (host CPU time)", flush=True)
        print(f"{res['env']} {n} envs on {device}: plain {res['sps_plain_median']:,.0f} env-steps/s, "
              f"profiled {res['sps_profiled_median']:,.0f}; median ratio {res['ratio_median']:.4f} "
              f"-> overhead {res['overhead_pct']:.2f}% (best spans: {res['overhead_of_best_pct']:.2f}%; quartiles of the ratio {res['ratio_quartiles']}; {a.rounds} interleaved "
              f"rounds x {a.steps} steps, {clock} clock)"
              + (f"; control (hooks off) median ratio {res['control_ratio_median']:.4f}" if a.control else ""), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"probe": "overhead", "results": results}, f, indent=1)
    if a.max_overhead is not None and any(r["overhead_pct"] > a.max_overhead for r in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
