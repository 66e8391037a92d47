"""Your own batched torch env, profiled by perfkit — no MuJoCo, no perfkit-specific base class.

``PointReach``: ``num_envs`` point masses on a plane, each pushed by a 2-D force towards its own
goal. It is written the way perfkit recommends (buffers allocated in ``__init__``, in-place /
``out=`` ops in ``step``, boolean-mask resets), so perfkit finds nothing to fix in it:

    python examples/custom_env.py                       # run it (a proportional controller drives it)
    perfkit profile examples/custom_env.py              # profile it unchanged: steps, segments, SPS
    perfkit lint examples/custom_env.py                 # static check: quiet
    python examples/custom_env.py --self-check          # the Python API: a budget around step() and an
                                                        # in-process perfkit.Session with its summary

perfkit sees a step because the object has an integer ``num_envs`` and a ``step`` method; it puts
``_simulate`` in the physics segment and ``compute_reward`` in the reward segment by their names
(``perfkit.segment("...")`` overrides that when names do not say it).
"""

from __future__ import annotations

import argparse

import torch


class PointReach:
    """Batched point-mass reaching: obs = (position, velocity, goal - position), act = force in [-1, 1]^2."""

    obs_dim, act_dim = 6, 2

    def __init__(self, num_envs: int, device="cpu", dt: float = 0.05, max_episode_steps: int = 100, seed: int = 0):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        self.num_envs, self.device, self.dt = num_envs, torch.device(device), dt
        self.max_episode_steps = max_episode_steps
        n, dev = num_envs, self.device
        self._gen = torch.Generator(device=dev)
        self._gen.manual_seed(seed)
        self.pos = torch.zeros(n, 2, device=dev)
        self.vel = torch.zeros(n, 2, device=dev)
        self.goal = torch.zeros(n, 2, device=dev)
        self.obs = torch.zeros(n, self.obs_dim, device=dev)
        self.reward = torch.zeros(n, device=dev)
        self.done = torch.zeros(n, dtype=torch.bool, device=dev)
        self.steps = torch.zeros(n, dtype=torch.int32, device=dev)
        self._force = torch.zeros(n, 2, device=dev)
        self._dist = torch.zeros(n, device=dev)
        self._reached = torch.zeros(n, dtype=torch.bool, device=dev)
        self._new_goal = torch.zeros(n, 2, device=dev)
        self._done_col = self.done.unsqueeze(1)
        self._all = torch.ones(n, dtype=torch.bool, device=dev)

    def reset(self) -> torch.Tensor:
        self.done.copy_(self._all)
        self.reset_done()
        self.done.zero_()
        return self.obs

    def step(self, actions: torch.Tensor):
        torch.clamp(actions, -1.0, 1.0, out=self._force)
        self._simulate()
        self.compute_reward()
        self.steps.add_(1)
        torch.ge(self.steps, self.max_episode_steps, out=self.done)
        self.done.logical_or_(self._reached)
        self.reset_done()
        return self.obs, self.reward, self.done, {}

    def _simulate(self) -> None:
        # semi-implicit Euler with linear drag
        self.vel.mul_(0.95).add_(self._force, alpha=self.dt)
        self.pos.add_(self.vel, alpha=self.dt)

    def compute_reward(self) -> None:
        torch.sub(self.goal, self.pos, out=self.obs[:, 4:])
        torch.linalg.vector_norm(self.obs[:, 4:], dim=1, out=self._dist)
        torch.lt(self._dist, 0.05, out=self._reached)
        torch.neg(self._dist, out=self.reward)
        self.reward.add_(self._reached, alpha=10.0)

    def reset_done(self) -> None:
        """Restart finished worlds through the boolean mask: new goal, origin, zero velocity."""
        self._new_goal.uniform_(-1.0, 1.0, generator=self._gen)
        torch.where(self._done_col, self._new_goal, self.goal, out=self.goal)
        self.pos.masked_fill_(self._done_col, 0.0)
        self.vel.masked_fill_(self._done_col, 0.0)
        self.steps.masked_fill_(self.done, 0)
        self.obs[:, 0:2].copy_(self.pos)
        self.obs[:, 2:4].copy_(self.vel)
        torch.sub(self.goal, self.pos, out=self.obs[:, 4:])


def run(env: PointReach, steps: int) -> float:
    """Drive ``env`` with a proportional-derivative controller; returns the mean reward (one read)."""
    actions = torch.zeros(env.num_envs, env.act_dim, device=env.device)
    total = torch.zeros(env.num_envs, device=env.device)
    obs = env.reset()
    for _ in range(steps):
        torch.mul(obs[:, 4:], 4.0, out=actions)  # towards the goal ...
        actions.sub_(obs[:, 2:4], alpha=2.0)  # ... damped
        obs, reward, done, _ = env.step(actions)
        total.add_(reward)
    return total.sum().item() / (steps * env.num_envs)  # the run's one host read


def self_check(env: PointReach) -> None:
    import perfkit

    actions = torch.zeros(env.num_envs, env.act_dim, device=env.device)
    env.reset()
    with perfkit.budget(syncs=0, allocs=0):  # raises perfkit.BudgetExceeded, listing sites, if not
        for _ in range(10):
            env.step(actions)
    print("budget: 10 steps, 0 syncs, 0 allocations")
    with perfkit.Session(command=["custom_env.py"]) as session:
        run(env, 200)
    rec = session.run
    print(f"session: {rec.steps} steps x {rec.num_envs} envs, {rec.sps:,.0f} env-steps/s, {len(rec.findings)} findings")
    for name, seg in rec.segments.items():
        print(f"  {name:8s} cpu {seg.cpu_ms_per_step:.3f} ms/step  syncs/step {seg.syncs_per_step:g}  allocs/step {seg.allocs_per_step:g}")
    for f in rec.findings:
        print(f"  {f.kind} {f.path}:{f.line} {f.op} x{f.per_step:g}/step")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--self-check", action="store_true", help="budget + in-process perfkit.Session")
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        p.error("--num-envs and --steps must be >= 1")
    env = PointReach(args.num_envs, device=args.device)
    if args.self_check:
        self_check(env)
    else:
        print(f"PointReach x {args.num_envs} on {env.device}: mean reward {run(env, args.steps):.4f} per step")


if __name__ == "__main__":
    main()
