"""MuJoCo Warp (on Warp's CPU device) and MuJoCo C give the same trajectories over a short horizon.

Stated tolerance, from the same state and the same actions, feet in contact with the floor, over
8 control steps (32 physics steps of 10 ms): qpos within 1e-4 (m or rad), qvel within 2e-3 (/s),
reward within 2e-3 — measured differences are ~1e-5 (float32 in Warp vs float64 in C). This holds
because the ant's solver is given enough Newton iterations to converge (ant.xml); with a budget of
4 iterations the two solvers stop at different points (different warm starts) and impacts make the
trajectories differ by ~0.5 in qvel within a few steps.

Slow: the first run compiles MuJoCo Warp's kernels for the CPU (~1 min; cached afterwards).
"""

from __future__ import annotations

import pytest
import torch

from perfkit.envs import make_env


@pytest.mark.slow
def test_mjwarp_and_mujoco_backends_agree_over_a_short_horizon():
    n = 4
    cpu = make_env("ant", n, backend="mujoco", seed=0)
    warp = make_env("ant", n, backend="mjwarp", device="cpu", seed=0)
    assert warp.backend == "mjwarp" and not warp.captured  # no CUDA graph on Warp's CPU device
    assert (warp.obs_dim, warp.act_dim, warp.sim_dt, warp.decimation) == (cpu.obs_dim, cpu.act_dim, cpu.sim_dt, cpu.decimation)

    g = torch.Generator().manual_seed(1)
    cpu.reset()
    for _ in range(40):  # settle onto the feet, so the comparison runs through contacts
        cpu.step(torch.rand(n, cpu.act_dim, generator=g) * 2 - 1)
    qpos, qvel = cpu.get_state()
    cpu.set_state(qpos, qvel)
    warp.set_state(qpos, qvel)
    torch.testing.assert_close(warp.obs, cpu.obs, atol=1e-6, rtol=0)

    moved = 0.0
    for _ in range(8):
        a = torch.rand(n, cpu.act_dim, generator=g) * 2 - 1
        _, rw, dw, _ = warp.step(a)
        _, rc, dc, _ = cpu.step(a)
        qw, vw = warp.get_state()
        qc, vc = cpu.get_state()
        torch.testing.assert_close(qw, qc, atol=1e-4, rtol=0)
        torch.testing.assert_close(vw, vc, atol=2e-3, rtol=0)
        torch.testing.assert_close(rw, rc, atol=2e-3, rtol=0)
        assert torch.equal(dw, dc)
        moved = max(moved, (qc - qpos).abs().max().item())
    assert moved > 0.05, "the worlds actually moved, so agreement is not trivial"
