"""Warp kernels on tensors shared with torch, on streams CUDA does or does not order with torch's.

* ``side``: torch works on a side stream while Warp launches on its own stream: nothing orders the
  two — a race (measured on the H200: 811,008 of 1,048,576 elements right);
* ``own``: torch on its legacy default stream, Warp on its own (blocking) stream: the legacy default
  stream orders with every blocking stream — no race (every element right, measured twice);
* ``torch``: Warp on torch's stream (``wp.ScopedStream(wp.stream_from_torch())``) — no race.
"""
import sys

import torch
import warp as wp

wp.config.quiet = True


@wp.kernel
def scale(a: wp.array(dtype=wp.float32), s: float):
    i = wp.tid()
    a[i] = a[i] * s


class SharedEnv:
    def __init__(self, num_envs=4096, mode="own"):
        self.num_envs = num_envs
        self.t = torch.ones(num_envs, device="cuda")
        self.a = wp.from_torch(self.t)
        self.mode = mode
        self.side = torch.cuda.Stream()

    def step(self, actions):
        if self.mode == "torch":
            self.t.add_(actions)
            with wp.ScopedStream(wp.stream_from_torch()):
                wp.launch(scale, dim=self.num_envs, inputs=[self.a, 0.5])
        elif self.mode == "side":
            with torch.cuda.stream(self.side):
                self.t.add_(actions)
                wp.launch(scale, dim=self.num_envs, inputs=[self.a, 0.5])  # <- stream
            torch.cuda.current_stream().wait_stream(self.side)
        else:
            self.t.add_(actions)
            wp.launch(scale, dim=self.num_envs, inputs=[self.a, 0.5])  # ordered: legacy default + blocking
        return self.t


def main(steps=12, mode="own"):
    env = SharedEnv(mode=mode)
    a = torch.zeros(env.num_envs, device="cuda")
    for _ in range(steps):
        env.step(a)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(mode=sys.argv[1] if len(sys.argv) > 1 else "own")
