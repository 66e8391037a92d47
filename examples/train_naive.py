"""The PPO loop of ``examples/train.py`` with the classic GPU anti-patterns planted — for perfkit to find.

    python examples/train_naive.py                          # every anti-pattern active
    python examples/train_naive.py --fix item_log,env_loop  # those two replaced by their sync-free form
    python examples/train_naive.py --fix all                # behaves like train.py
    python examples/train_naive.py --plant-scale 40         # each anti-pattern ~40x as costly a step
    python examples/train_naive.py --fix env_loop --ab-fix item_log --iterations 16  # A/B in one run
    perfkit profile examples/train_naive.py                 # reports each one with its line

Each planted anti-pattern sits on its own line, marked ``# ANTI-PATTERN <name>``, inside an
``if``/``else`` whose other branch is the fix (what train.py does). Names for ``--fix``:

  item_log       per-step ``.item()`` logging            -> accumulate on the device, read once per iteration
  nonzero_reset  ``nonzero()`` to find the envs to reset -> ``masked_fill_`` with the boolean mask
  env_loop       a Python loop over envs                 -> one batched op
  fresh_tensors  new tensors every step                  -> in-place update of a preallocated buffer
  print_tensor   ``print`` of a device tensor            -> print host floats already read
  cpu_numpy      a blocking ``.cpu().numpy()`` per step  -> the on-device episode count PPO keeps
  list_gather    indexing with a Python list             -> ``index_select`` with a device index tensor

``--plant-scale K`` (default 1: the script as above) makes each planted anti-pattern but the per-env
loop (whose cost already grows with the envs) cost about K times as much per step, as a program that
logs, reads or resets K things a step would: each planted sync runs K times a step, the K-1 extra
ones each after a slice of real device work (a per-env term computed from the observation, in place:
:class:`PlantedWork`), so that each waits on queued GPU work; ``fresh_tensors`` rebuilds the tracker
K times a step and ``print_tensor`` prints K times an iteration. The fix branch does the same device
work without the sync (or the allocations), so that a fix saves what its anti-pattern costs.
``--plant-scale 40,print_tensor=200`` sets one anti-pattern's scale apart.

The last line printed is ``SPS: <float>``: env steps per second over the steady-state iterations
(the first one — compilation, warm-up — left out), timed between per-iteration host reads.

``--ab-fix NAME[,NAME...]`` measures a fix against its anti-pattern in one run: arm A runs with
``--fix``, arm B with ``--fix`` plus these; the iterations alternate A, B (one warm-up each), then
A B B A, A B B A, ... (:func:`ab_arm`), so that a drift of the machine during the run falls on both
arms alike. The last two lines are ``SPS[A]: <float>`` and ``SPS[B]: <float>``, each over its arm's
steady iterations (an even ``--iterations`` gives both arms as many).
"""

from __future__ import annotations

import argparse

import torch

from perfkit.envs import BACKENDS, ENV_NAMES, make_env
from perfkit.rl import PPO, PPOConfig

ANTI_PATTERNS = ("item_log", "nonzero_reset", "env_loop", "fresh_tensors", "print_tensor", "cpu_numpy", "list_gather")
WATCHED_ENVS = [0, 1, 2, 3]  # a few envs whose torso height is printed each iteration


def parse_fix(text: str) -> frozenset[str]:
    names = {n.strip() for n in text.split(",") if n.strip()}
    if "all" in names:
        return frozenset(ANTI_PATTERNS)
    unknown = sorted(names - set(ANTI_PATTERNS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown anti-pattern(s) {unknown}; expected names from {list(ANTI_PATTERNS)} or 'all'")
    return frozenset(names)


def ab_arm(it: int) -> str:
    """``--ab-fix``: the arm of iteration ``it``: ``A``, ``B`` (the warm-up of each), then ``A B B A``
    repeated."""
    if it < 2:
        return "AB"[it]
    return "B" if (it - 2) % 4 in (1, 2) else "A"


SCALED = tuple(n for n in ANTI_PATTERNS if n != "env_loop")  # the per-env loop's cost already grows with the envs


def parse_scale(text: str) -> dict[str, int]:
    """``K`` or ``K,NAME=K2,...``: the plant scale of every scaled anti-pattern, and of some apart."""
    out = dict.fromkeys(SCALED, 1)
    for part in (t.strip() for t in text.split(",")):
        if not part:
            continue
        name, _, value = part.rpartition("=")
        if name and name not in SCALED:
            raise argparse.ArgumentTypeError(f"--plant-scale: {name!r} is not a scaled anti-pattern; expected one of "
                                             f"{list(SCALED)}")
        try:
            k = int(value)
        except ValueError:
            k = 0
        if k < 1:
            raise argparse.ArgumentTypeError(f"--plant-scale wants integers >= 1 (K or K,NAME=K2,...), got {part!r}")
        out.update({name: k} if name else dict.fromkeys(SCALED, k))
    return out


class PlantedWork:
    """``--plant-scale``: the device work and buffers of the scaled anti-patterns. Each extra planted
    sync reads the result of a slice of real device work, :meth:`slice` (a per-env term computed from
    the observation: a few kernels in place on a preallocated buffer, no allocation), so that it waits
    on queued GPU work and not just a round trip; the fix branch computes the same slices and keeps the
    result on the device. With scale 1 nothing here runs (no buffer is made): the plain planted script."""

    def __init__(self, scale: dict[str, int], num_envs: int, obs_dim: int, device):
        self.scale = scale
        self.logged: list[float] = []  # the extra host reads of item_log (not the reward's)
        if max(scale.values()) == 1:
            return  # the plain plant: no buffer either
        self.term = torch.zeros((num_envs, obs_dim), device=device)  # the slice's output
        self.flag = torch.zeros(num_envs, dtype=torch.bool, device=device)  # a per-env flag from a slice
        self.tracker = torch.zeros(num_envs, device=device)  # another per-env tracker, reset where flagged
        self.on_device = torch.zeros(num_envs, device=device)  # the fixes: what the reads would have read
        self.means = torch.zeros(scale["item_log"], device=device)  # item_log's fix: the terms' means
        self.watched = torch.zeros((len(WATCHED_ENVS), obs_dim), device=device)

    def extra(self, name: str) -> range:
        """The extra repetitions of anti-pattern ``name`` (none at scale 1)."""
        return range(1, self.scale[name])

    def slice(self, obs: torch.Tensor, k: int) -> torch.Tensor:
        """One slice of device work: the k-th per-env term ``tanh(obs * c_k)``, in place. Light on
        purpose: a sync saves at most its round trip and the host work up to the next sync (the
        cost model's ``sync_wait``), so heavier GPU work would only lengthen every arm's step."""
        torch.mul(obs, 1.0 + 0.01 * k, out=self.term)
        return self.term.tanh_()

    def flags(self, obs: torch.Tensor, k: int) -> torch.Tensor:
        """A per-env flag from the k-th slice (a term past its threshold): one more kernel, in place."""
        return torch.gt(self.slice(obs, k)[:, 0], 0.5, out=self.flag)

    def masks(self, done: torch.Tensor, obs: torch.Tensor, name: str):
        """``(0, done)``, then ``(k, flags)`` for each extra repetition: the per-env masks to read."""
        yield 0, done
        for k in self.extra(name):
            yield k, self.flags(obs, k)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="ant", choices=ENV_NAMES)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--num-steps", type=int, default=32, help="rollout length per env per iteration")
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--device", default=None, help="default: cuda when available (mjwarp), else cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fix", type=parse_fix, default=frozenset(), metavar="NAME[,NAME...]", help="replace these anti-patterns by their fix ('all' for every one)")
    p.add_argument("--ab-fix", type=parse_fix, default=frozenset(), metavar="NAME[,NAME...]",
                   help="A/B in one run: iterations alternate between --fix (A) and --fix plus these (B), A B B A "
                   "after a warm-up iteration each; prints SPS[A] and SPS[B]")
    p.add_argument("--plant-scale", type=parse_scale, default=parse_scale("1"), metavar="K[,NAME=K...]",
                   help="each planted anti-pattern costs ~K times as much per step (default 1: as written)")
    args = p.parse_args(argv)
    if args.num_envs < len(WATCHED_ENVS) or args.iterations < 1 or args.num_steps < 1:
        p.error(f"--num-envs must be >= {len(WATCHED_ENVS)} (envs {WATCHED_ENVS} are watched); --iterations and --num-steps >= 1")
    if args.ab_fix and (args.iterations < 4 or not args.ab_fix - args.fix):
        p.error("--ab-fix needs --iterations >= 4 (a warm-up and a steady iteration per arm) and a fix not in --fix")
    return args


def main(argv=None) -> float:
    args = parse_args(argv)
    arms = {"A": args.fix, "B": args.fix | args.ab_fix}  # without --ab-fix every iteration is arm A

    def arm(it: int) -> str:
        return ab_arm(it) if args.ab_fix else "A"

    warmup = 2 if args.ab_fix else 1  # iterations left out of the SPS (one per arm)
    torch.manual_seed(args.seed)
    env = make_env(args.env, args.num_envs, backend=args.backend, device=args.device, seed=args.seed)
    if env.device.type == "cpu":
        torch.set_num_threads(1)  # as in train.py: tiny tensors, cores go to MuJoCo's rollout threads
    ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, device=env.device, cfg=PPOConfig(num_steps=args.num_steps), seed=args.seed)
    print(f"env={env.name} backend={env.backend} device={env.device} num_envs={env.num_envs} fixed={sorted(args.fix) or 'none'}"
          + (f" ab_fix={sorted(args.ab_fix)}" if args.ab_fix else ""), flush=True)

    watched_idx = torch.tensor(WATCHED_ENVS, device=env.device)  # the fix for list_gather: index on the device, made once
    watched_obs = torch.zeros((len(WATCHED_ENVS), env.obs_dim), device=env.device)
    ep_return = torch.zeros(env.num_envs, device=env.device)  # this script's own per-env episode tracker
    plant = PlantedWork(args.plant_scale, env.num_envs, env.obs_dim, env.device)
    step_rewards: list[float] = []
    host_counts = [0] * args.plant_scale["cpu_numpy"]  # per mask read on the host: [0] counts episodes
    steady_steps, steady_time = dict.fromkeys(arms, 0), dict.fromkeys(arms, 0.0)

    obs = env.reset()
    for it in range(args.iterations):
        fix = arms[arm(it)]
        with torch.inference_mode():
            for _ in range(ppo.cfg.num_steps):
                actions = ppo.act(obs)
                if "env_loop" in fix:
                    actions.clamp_(-1.0, 1.0)
                else:
                    for i in range(env.num_envs):  # ANTI-PATTERN env_loop: one tiny kernel per env
                        actions[i].clamp_(-1.0, 1.0)
                obs, reward, done, info = env.step(actions)
                ppo.process_env_step(reward, done, info)

                # each planted anti-pattern, then its fix; --plant-scale repeats both (PlantedWork)
                if "item_log" in fix:
                    for k in plant.extra("item_log"):
                        torch.mean(plant.slice(obs, k), out=plant.means[k])  # kept on the device
                else:
                    for k in range(args.plant_scale["item_log"]):
                        term = reward if k == 0 else plant.slice(obs, k)
                        (plant.logged if k else step_rewards).append(term.mean().item())  # ANTI-PATTERN item_log: host read every step
                if "fresh_tensors" in fix:
                    for _ in range(args.plant_scale["fresh_tensors"]):
                        ep_return.add_(reward)
                else:
                    for _ in range(args.plant_scale["fresh_tensors"]):
                        ep_return = torch.zeros(env.num_envs, device=env.device) + ep_return + reward  # ANTI-PATTERN fresh_tensors
                if "nonzero_reset" in fix:
                    ep_return.masked_fill_(done, 0.0)
                    for k in plant.extra("nonzero_reset"):
                        plant.tracker.masked_fill_(plant.flags(obs, k), 0.0)
                else:
                    for k, mask in plant.masks(done, obs, "nonzero_reset"):
                        finished = mask.nonzero(as_tuple=True)[0]  # ANTI-PATTERN nonzero_reset: data-dependent shape
                        (plant.tracker if k else ep_return)[finished] = 0.0
                if "cpu_numpy" in fix:
                    for k in plant.extra("cpu_numpy"):
                        plant.on_device.add_(plant.flags(obs, k))
                else:
                    for k, mask in plant.masks(done, obs, "cpu_numpy"):
                        done_host = mask.cpu().numpy()  # ANTI-PATTERN cpu_numpy: blocking copy every step
                        host_counts[k] += int(done_host.sum())
                if "list_gather" in fix:
                    torch.index_select(obs, 0, watched_idx, out=watched_obs)
                    for k in plant.extra("list_gather"):
                        torch.index_select(plant.slice(obs, k), 0, watched_idx, out=plant.watched)
                else:
                    for k in range(args.plant_scale["list_gather"]):
                        rows = obs if k == 0 else plant.slice(obs, k)
                        (plant.watched if k else watched_obs).copy_(rows[[0, 1, 2, 3]])  # ANTI-PATTERN list_gather: the list (WATCHED_ENVS) is copied host->device

        ppo.update(obs)
        metrics = ppo.log_iteration()  # one device->host read per iteration (as in train.py)
        if it >= warmup or args.iterations == 1:
            steady_steps[arm(it)] += ppo.cfg.num_steps * env.num_envs
            steady_time[arm(it)] += ppo.cfg.num_steps * env.num_envs / metrics["sps"]
        mean_step_reward = sum(step_rewards) / len(step_rewards) if step_rewards else metrics["reward_per_step"]
        step_rewards.clear()
        plant.logged.clear()
        episodes = host_counts[0] if "cpu_numpy" not in fix else int(metrics["episodes"])
        host_counts = [0] * len(host_counts)
        print(
            f"iter {it:4d}  reward/step {mean_step_reward:8.4f}  mean episode reward {metrics['episode_return']:9.3f}  "
            f"episodes {episodes:5d}  SPS {metrics['sps']:,.0f}",
            flush=True,
        )
        # printed after log_iteration() read the clock: the time counts in the next iteration, so it runs as that one's arm
        if "print_tensor" in arms[arm(it + 1)]:
            for k in plant.extra("print_tensor"):
                torch.index_select(plant.slice(obs, k), 0, watched_idx, out=plant.watched)
        else:
            for k in range(args.plant_scale["print_tensor"]):
                rows = watched_obs if k == 0 else torch.index_select(plant.slice(obs, k), 0, watched_idx, out=plant.watched)
                print(f"  watched envs' {f'term {k}' if k else 'torso height'}:", rows[:, 0])  # ANTI-PATTERN print_tensor: formats (and syncs) on the host
    if args.ab_fix:
        for name in arms:
            print(f"SPS[{name}]: {steady_steps[name] / steady_time[name]:.1f}", flush=True)
        return steady_steps["A"] / steady_time["A"]
    sps = steady_steps["A"] / steady_time["A"]
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()
