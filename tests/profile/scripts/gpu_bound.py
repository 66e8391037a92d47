"""A GPU-bound, sync-free CUDA loop: CUDA-event segment times must add up to the wall time per step."""
import sys

import torch


class HeavyEnv:
    def __init__(self, num_envs=4096, width=2048):
        self.num_envs = num_envs
        self.state = torch.rand(num_envs, width, device="cuda")
        self.w = torch.rand(width, width, device="cuda") / width
        self.out = torch.empty_like(self.state)

    def simulate(self):
        for _ in range(4):
            torch.matmul(self.state, self.w, out=self.out)
            torch.tanh(self.out, out=self.state)

    def compute_reward(self):
        return self.state.mean(dim=1)

    def step(self, actions):
        self.simulate()
        return self.state, self.compute_reward()


def _loop(env, pol, steps):
    obs = env.state
    for _ in range(steps):
        with torch.no_grad():
            a = pol(obs)
        obs, r = env.step(a)


def _build():
    torch.manual_seed(0)
    env = HeavyEnv()
    pol = torch.nn.Sequential(torch.nn.Linear(2048, 1024), torch.nn.ELU(), torch.nn.Linear(1024, 2048)).cuda()
    return env, pol


def main(steps=120):
    env, pol = _build()
    _loop(env, pol, steps)
    torch.cuda.synchronize()
    print("ok")


def gpu_ms_per_step(steps=200):
    """The loop's device time per step, unprofiled: two CUDA events around ``steps`` steps (the GPU
    never idles inside, the host being far ahead), after a warm-up."""
    env, pol = _build()
    _loop(env, pol, 20)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    _loop(env, pol, steps)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
