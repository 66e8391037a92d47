#!/usr/bin/env python3
"""On the H200: the manager env's cost of looking measured in one process (issue 23's diagnosis by
cause). Whole rsl_rl iterations (``runner.learn(1)``: 24 env steps and the PPO update, timed between
device syncs) run in arms that alternate iteration by iteration, the order rotating each round, so the
machine's drift — fresh processes' plain SPS spread ±13 % on this machine — cancels in each pair.

* Phase 1, no perfkit: ``plain`` and ``warn`` (torch's sync-debug warnings on and caught as a CUDA
  session catches them, counting nothing: the runtime's detection alone).
* Phase 2, inside one ``perfkit`` session (``sync_counting = "every-step"``, so the arms decide):
  ``counting`` (every sync counted, the state before this issue's gate) and ``paused``
  (``hub.pause_syncs()``: the state the gate keeps between counted periods — the hooks installed,
  passing calls through, the detection off); then ``counting`` against ``no-emit`` (every sync caught,
  labelled and its hook run, but ``hub.emit`` — finding the site and segment, counting — a no-op) and
  ``no-emit`` against ``paused``: the event's cost split into its site-and-count part and the rest (the
  runtime's warning, the catcher, the always-sync hooks, the wait timing).
* Phase 3: ``plain`` again: phases 1 and 3 bracket phase 2 (the session cannot be switched off and on
  per iteration: its start-up is one-off work).

    python3 scripts/gpu/onoff.py --out DIR [--rounds 10] [--num-envs 4096] [--device cuda]

Writes ``DIR/onoff.json`` (every iteration's time by arm, the paired ratios) and ``DIR/onoff.md``.
On the CPU (``--device cpu --backend mujoco --num-envs 16 --rounds 2``) the same path runs as a smoke
test (the ``warn`` arm is then the plain one: there is no CUDA detection to turn on).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="auto")
    a = ap.parse_args(argv)
    import torch
    from rsl_rl.runners import OnPolicyRunner

    from manager_env import train_rsl_rl as train  # its config and arguments (examples/ is on the path)
    from manager_env.env import ManagerBasedRLEnv
    from manager_env.env_cfg import ant_velocity_env_cfg
    from manager_env.wrapper import RslRlVecEnvWrapper
    from perfkit.collectors import hub
    from perfkit.collectors.cuda_syncs import RuntimeSyncs
    from perfkit.collectors.patches import Patcher
    from perfkit.config import Config
    from perfkit.profile.session import Session

    args = train.parse_args(["--num-envs", str(a.num_envs), "--device", a.device, "--backend", a.backend])
    cuda = torch.device(a.device).type == "cuda"
    torch.manual_seed(0)
    env = RslRlVecEnvWrapper(ManagerBasedRLEnv(ant_velocity_env_cfg(num_envs=a.num_envs, backend=args.backend,
                                                                    device=a.device, seed=0)))
    log_dir = tempfile.mkdtemp(prefix="onoff_")
    times: dict[str, list[float]] = {}
    pairs: dict[str, list[float]] = {}

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    learning: dict[str, list[float]] = {}  # the PPO update's share of each timed iteration, by arm
    arm_now: list[str | None] = [None]

    def timed(arm: str) -> float:
        sync()
        arm_now[0] = arm
        t0 = time.perf_counter()
        runner.learn(num_learning_iterations=1)
        sync()
        dt = time.perf_counter() - t0
        arm_now[0] = None
        times.setdefault(arm, []).append(dt)
        return dt

    def timing_update(alg_cls: type) -> None:
        """Time the learning phase inside each iteration: the class's ``update`` replaced by a timed call
        of it (on the class, where a session's discovery finds and wraps the learner: an instance attribute
        would hide perfkit's segment wrapper)."""
        real = alg_cls.update

        def update(self, *args, **kwargs):
            sync()
            t0 = time.perf_counter()
            try:
                return real(self, *args, **kwargs)
            finally:
                sync()
                if arm_now[0] is not None:
                    learning.setdefault(arm_now[0], []).append(time.perf_counter() - t0)

        alg_cls.update = update

    def alternate(arms: dict, ratio: str) -> None:
        """``arms``: name -> (switch on, switch off); each round runs each arm once, the order rotating."""
        names = list(arms)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            got = {}
            for name in order:
                on, off = arms[name]
                on()
                try:
                    got[name] = timed(name)
                finally:
                    off()
            pairs.setdefault(ratio, []).append(got[names[0]] / got[names[1]])  # time ratio: > 1 = slower

    warn_patcher = Patcher()

    def warn_on() -> None:
        if cuda:
            RuntimeSyncs(lambda frame: None, lambda: False, lambda: None).install(warn_patcher, torch)

    nothing = lambda: None  # noqa: E731
    try:
        runner = OnPolicyRunner(env, train.train_cfg(args), log_dir=log_dir, device=a.device)
        timing_update(type(runner.alg))
        runner.learn(num_learning_iterations=2, init_at_random_ep_len=True)  # warm-up
        alternate({"warn": (warn_on, warn_patcher.undo), "plain": (nothing, nothing)}, "warn/plain")
        with Session(command=["onoff"], config=Config(sync_counting="every-step")) as session:
            runner.learn(num_learning_iterations=2)  # the session's warm-up and discovery window
            real_emit = hub.emit

            def no_emit_on() -> None:
                hub.emit = lambda *args, **kwargs: None

            def no_emit_off() -> None:
                hub.emit = real_emit

            alternate({"counting": (nothing, nothing), "paused": (hub.pause_syncs, hub.resume_syncs)},
                      "counting/paused")
            alternate({"counting": (nothing, nothing), "no-emit": (no_emit_on, no_emit_off)}, "counting/no-emit")
            alternate({"no-emit": (no_emit_on, no_emit_off), "paused": (hub.pause_syncs, hub.resume_syncs)},
                      "no-emit/paused")
        for _ in range(a.rounds):
            timed("plain (after)")
    finally:
        env.close()
        shutil.rmtree(log_dir, ignore_errors=True)
    run = session.run
    med = {arm: statistics.median(v) for arm, v in times.items()}
    plain = statistics.median(times["plain"] + times["plain (after)"])
    steps = args.num_steps * a.num_envs
    out = {
        "args": vars(a), "torch": torch.__version__, "device": torch.cuda.get_device_name() if cuda else "cpu",
        "iteration_s": times, "median_s": med, "sps": {arm: steps / m for arm, m in med.items()},
        "learning_s": learning, "median_learning_s": {arm: statistics.median(v) for arm, v in learning.items() if v},
        "ratios": {k: {"per_round": v, "median": statistics.median(v)} for k, v in pairs.items()},
        "session_over_plain": {arm: med[arm] / plain for arm in ("counting", "paused")},
        "self": dataclasses.asdict(run.self) if run.self is not None else None,
        "syncs_per_step": run.syncs_per_step, "steps_in_session": run.steps,
    }
    dest = Path(a.out)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "onoff.json").write_text(json.dumps(out, indent=1, default=str))
    lines = [f"# The manager env's iterations by arm, one process ({out['device']}, {a.num_envs} envs, {a.rounds} rounds)", "",
             f"`python3 scripts/gpu/onoff.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
             "| arm | median s / iteration | env-steps/s | learning s (median) | the rest s (median) |",
             "|---|---:|---:|---:|---:|"]
    for arm, m in med.items():
        lv = learning.get(arm) or []
        rest = [t - l_ for t, l_ in zip(times[arm], lv)] if len(lv) == len(times[arm]) else []
        lines.append(f"| {arm} | {m:.4f} | {steps / m:,.0f} | "
                     + (f"{statistics.median(lv):.4f} | " if lv else "— | ")
                     + (f"{statistics.median(rest):.4f} |" if rest else "— |"))
    lines += ["", "| paired (time ratio, > 1: the first arm slower) | median | per round |", "|---|---:|---|"]
    lines += [f"| {k} | {statistics.median(v):.4f} | {', '.join(f'{x:.3f}' for x in v)} |" for k, v in pairs.items()]
    lines += ["", "session arms over plain (phases 1 and 3 together, not interleaved): "
                  + ", ".join(f"{k} {v:.4f}" for k, v in out["session_over_plain"].items()),
              f"the session's record: {run.syncs_per_step:.2f} syncs/step; self block per step: "
              f"{run.self.per_step_ms if run.self else None} ms ({run.self.per_step if run.self else None})"]
    (dest / "onoff.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
