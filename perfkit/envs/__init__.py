"""Reference batched locomotion env.

``make_env(name, num_envs, backend="auto", device=None, seed=0)`` builds an ant-like quadruped
(``"ant"``, this project's MJCF) or MuJoCo's humanoid (``"humanoid"``) as one batch of
``num_envs`` worlds with torch tensors ``[num_envs, ...]`` in and out:

* ``backend="mjwarp"``: MuJoCo Warp (GPU; also Warp's CPU device), physics captured in a CUDA
  graph launched on torch's current stream, state shared zero-copy with torch;
* ``backend="mujoco"``: MuJoCo C through ``mujoco.rollout`` threads (CPU only);
* ``backend="auto"``: ``mjwarp`` when CUDA is available (and ``device`` is not ``"cpu"``), else
  ``mujoco``.

``step`` makes no host-device sync and no allocation on either backend.
"""

from __future__ import annotations

BACKENDS = ("auto", "mjwarp", "mujoco")
ENV_NAMES = ("ant", "humanoid")


def make_env(name: str = "ant", num_envs: int = 64, backend: str = "auto", device=None, seed: int = 0):
    """Build the batched reference env. See the module docstring; raises ``ValueError``/``TypeError``
    with what was expected on a bad argument."""
    from perfkit.envs.locomotion import check_num_envs, resolve_device
    from perfkit.envs.models import get_spec

    get_spec(name)
    check_num_envs(num_envs)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        import torch

        wants_cpu = device is not None and resolve_device(device).type == "cpu"
        backend = "mjwarp" if torch.cuda.is_available() and not wants_cpu else "mujoco"
    if backend == "mujoco":
        from perfkit.envs.mujoco_cpu import MujocoEnv

        return MujocoEnv(name, num_envs, device="cpu" if device is None else device, seed=seed)
    from perfkit.envs.mjwarp import MjWarpEnv

    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return MjWarpEnv(name, num_envs, device=device, seed=seed)


__all__ = ["make_env", "BACKENDS", "ENV_NAMES"]
