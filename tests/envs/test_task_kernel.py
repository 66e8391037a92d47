"""The Warp task kernel (MuJoCo Warp backend) computes what the torch task code defines.

Two physics-free envs hold the same float32 state; one runs ``LocomotionEnv.task_step`` (torch),
the other ``task_kernel.locomotion_step`` on Warp's CPU device. Worlds are planted healthy, fallen,
too high, exploding, NaN in qpos, NaN in qvel, and at the horizon, and every output, counter and
reset state must match.
"""

from __future__ import annotations

import math

import pytest
import torch

from perfkit.envs.locomotion import LocomotionEnv

wp = pytest.importorskip("warp")

N = 64


class _StateOnly(LocomotionEnv):
    """The task on plain float32 torch state, no physics: what the kernel sees on MuJoCo Warp."""

    backend = "state-only"

    def _init_physics(self, mjm) -> None:
        self.qpos = torch.zeros((self.num_envs, self.nq), dtype=torch.float32)
        self.qvel = torch.zeros((self.num_envs, self.nv), dtype=torch.float32)
        self.warmstart = torch.zeros((self.num_envs, self.nv), dtype=torch.float32)

    def _simulate(self) -> None:
        pass

    def _reset_physics_extras(self, mask_col) -> None:
        self.warmstart.masked_fill_(mask_col, 0.0)


def _plant(env, g, step):
    """A random state with every case the task distinguishes, the same for a given ``(g, step)``."""
    lo, hi = env.spec.healthy_z
    env.qpos.copy_(torch.randn(env.qpos.shape, generator=g))
    env.qpos[:, 2] = lo + (hi - lo) * torch.rand(N, generator=g)  # healthy height...
    env.qvel.copy_(torch.randn(env.qvel.shape, generator=g) * 3)
    env.warmstart.copy_(torch.randn(env.warmstart.shape, generator=g))
    env.actions.copy_(torch.rand(env.actions.shape, generator=g) * 2 - 1)
    env.qpos[1, 2] = lo - 0.01  # fallen
    env.qpos[2, 2] = hi + 0.01  # too high
    env.qvel[3, 5] = -2 * env.spec.max_qvel  # exploding
    env.qpos[4, 2] = math.nan
    env.qvel[5, 0] = math.nan  # reward NaN too
    env.qvel[6, 0] = math.inf
    env.episode_length.copy_(torch.randint(0, env.max_episode_steps - 1, (N,), generator=g, dtype=torch.int32))
    env.episode_length[7] = env.max_episode_steps - 1  # truncated this step
    env.episode_length[1] = env.max_episode_steps - 1  # fallen and truncated at once
    env.episode_return.copy_(torch.randn(N, generator=g) * 10)
    env.final_return.fill_(-7.0 - step)
    env.final_length.fill_(-3)
    env._draw_reset_targets()


@pytest.mark.parametrize("name", ["ant", "humanoid"])
def test_warp_task_kernel_matches_the_torch_task_code(name):
    from perfkit.envs.task_kernel import TaskKernel

    wp.init()
    ref = _StateOnly(name, N, "cpu", seed=3)
    env = _StateOnly(name, N, "cpu", seed=3)
    kernel = TaskKernel(env, env.warmstart, wp.get_device("cpu"))
    for step in range(3):
        _plant(ref, torch.Generator().manual_seed(step), step)
        _plant(env, torch.Generator().manual_seed(step), step)
        with torch.no_grad():
            ref.task_step()
        kernel.launch()
        wp.synchronize_device("cpu")

        assert ref.done[:8].tolist() == [False] + [True] * 7, "every planted case ends its episode"
        assert ref.truncated[1] and ref.terminated[1] and ref.truncated[7] and not ref.terminated[7]
        assert not ref.done[8:].any() or ref.episode_length[ref.done].eq(0).all()
        for field in ("terminated", "truncated", "done", "episode_length", "final_length"):
            assert torch.equal(getattr(env, field), getattr(ref, field)), field
        for field in ("reward", "episode_return", "final_return"):
            torch.testing.assert_close(getattr(env, field), getattr(ref, field), atol=2e-5, rtol=1e-6, msg=field)
        for field in ("qpos", "qvel", "warmstart", "obs"):
            torch.testing.assert_close(getattr(env, field), getattr(ref, field), atol=0, rtol=0, msg=field)
        assert torch.isfinite(env.obs).all() and torch.isfinite(env.reward).all()
