"""The locomotion task's per-step work as one Warp kernel, for the MuJoCo Warp backend.

:mod:`perfkit.envs.locomotion` defines the task in torch ops (terminations, reward, episode
bookkeeping, masked reset, observations): about thirty small kernels per step. On the GPU each is
a launch and a few microseconds of a nearly idle device, which at 4096 worlds cost the ant ~10 % of
its physics throughput. Here the same definitions run as one thread per world in one kernel that
is captured into the physics CUDA graph right after the substeps, so a step is the graph and the
few torch ops before it (clamp the actions, draw the reset targets).

The torch code stays the definition (the MuJoCo C backend runs it); ``tests/envs/test_task_kernel.py``
checks this kernel against it on random, NaN, exploding, fallen and truncated worlds. The reset
noise is still drawn by torch (``LocomotionEnv._draw_reset_targets``) into ``_init_state``, which
this kernel reads, so both backends consume the same random stream.
"""

from __future__ import annotations

import torch
import warp as wp


@wp.kernel
def locomotion_step(
    # physics state, updated in place where a world resets
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    qacc_warmstart: wp.array2d(dtype=wp.float32),
    ctrl: wp.array2d(dtype=wp.float32),
    init_state: wp.array2d(dtype=wp.float32),  # [N, nq + nv] reset targets
    # task constants (ModelSpec)
    zmin: wp.float32,
    zmax: wp.float32,
    max_qvel: wp.float32,
    forward_weight: wp.float32,
    healthy_reward: wp.float32,
    ctrl_cost: wp.float32,
    max_episode_steps: wp.int32,
    # outputs and episode counters
    obs: wp.array2d(dtype=wp.float32),
    reward: wp.array(dtype=wp.float32),
    terminated: wp.array(dtype=wp.bool),
    truncated: wp.array(dtype=wp.bool),
    done: wp.array(dtype=wp.bool),
    episode_length: wp.array(dtype=wp.int32),
    episode_return: wp.array(dtype=wp.float32),
    final_return: wp.array(dtype=wp.float32),
    final_length: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    nq = qpos.shape[1]
    nv = qvel.shape[1]
    nu = ctrl.shape[1]

    # termination: root height in range and every |qvel| below the limit; a NaN fails both tests
    z = qpos[i, 2]
    healthy = int(0)
    if z >= zmin and z <= zmax:
        healthy = 1
    for j in range(nv):
        if not (wp.abs(qvel[i, j]) < max_qvel):
            healthy = 0

    # reward: forward velocity + healthy bonus - control cost; non-finite -> 0
    ctrl_sq = float(0.0)
    for j in range(nu):
        a = ctrl[i, j]
        ctrl_sq += a * a
    r = qvel[i, 0] * forward_weight
    r = r - ctrl_cost * ctrl_sq
    r = r + healthy_reward * float(healthy)
    if wp.isnan(r) or wp.isinf(r):
        r = 0.0
    reward[i] = r

    # episode bookkeeping
    length = episode_length[i] + 1
    ret = episode_return[i] + r
    term = healthy == 0
    trunc = length >= max_episode_steps
    ended = term or trunc
    terminated[i] = term
    truncated[i] = trunc
    done[i] = ended
    if ended:
        final_return[i] = ret
        final_length[i] = length
        ret = 0.0
        length = 0
        # reset this world to its drawn initial state
        for j in range(nq):
            qpos[i, j] = init_state[i, j]
        for j in range(nv):
            qvel[i, j] = init_state[i, nq + j]
            qacc_warmstart[i, j] = 0.0
    episode_return[i] = ret
    episode_length[i] = length

    # observation: qpos without the root's x/y, then qvel
    for j in range(nq - 2):
        obs[i, j] = qpos[i, j + 2]
    for j in range(nv):
        obs[i, nq - 2 + j] = qvel[i, j]


class TaskKernel:
    """``locomotion_step`` bound to one env's buffers (Warp views of its torch tensors, made once)."""

    def __init__(self, env, qacc_warmstart: torch.Tensor, device):
        spec = env.spec
        if env.qpos.dtype != torch.float32:
            raise TypeError(f"the task kernel runs on float32 state, got {env.qpos.dtype}")
        view = wp.from_torch
        self.device = device
        self.dim = env.num_envs
        self.inputs = [
            view(env.qpos), view(env.qvel), view(qacc_warmstart), view(env.actions), view(env._init_state),
            float(spec.healthy_z[0]), float(spec.healthy_z[1]), float(spec.max_qvel),
            float(spec.forward_weight), float(spec.healthy_reward), float(spec.ctrl_cost),
            int(env.max_episode_steps),
            view(env.obs), view(env.reward), view(env.terminated), view(env.truncated), view(env.done),
            view(env.episode_length), view(env.episode_return), view(env.final_return), view(env.final_length),
        ]

    def launch(self) -> None:
        """Enqueue the kernel on Warp's current stream of ``device``: the caller (``MjWarpEnv``) sets
        it, to torch's stream or to the stream being captured into the physics graph."""
        wp.launch(locomotion_step, dim=self.dim, inputs=self.inputs, device=self.device)  # perfkit: ignore[PK501] stream set by the caller
