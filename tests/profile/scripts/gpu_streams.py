"""Warp kernels on tensors shared with torch: on Warp's own stream (a hazard) or on torch's (none)."""
import sys

import torch
import warp as wp

wp.config.quiet = True


@wp.kernel
def scale(a: wp.array(dtype=wp.float32), s: float):
    i = wp.tid()
    a[i] = a[i] * s


class SharedEnv:
    def __init__(self, num_envs=4096, on_torch_stream=False):
        self.num_envs = num_envs
        self.t = torch.ones(num_envs, device="cuda")
        self.a = wp.from_torch(self.t)
        self.on_torch_stream = on_torch_stream

    def step(self, actions):
        self.t.add_(actions)
        if self.on_torch_stream:
            with wp.ScopedStream(wp.stream_from_torch()):
                wp.launch(scale, dim=self.num_envs, inputs=[self.a, 0.5])
        else:
            wp.launch(scale, dim=self.num_envs, inputs=[self.a, 0.5])  # <- stream
        return self.t


def main(steps=12, on_torch_stream=False):
    env = SharedEnv(on_torch_stream=on_torch_stream)
    a = torch.zeros(env.num_envs, device="cuda")
    for _ in range(steps):
        env.step(a)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(on_torch_stream="--torch-stream" in sys.argv)
