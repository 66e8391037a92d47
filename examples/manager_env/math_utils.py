"""Rotation and sampling helpers of the manager env, TorchScript-compiled as robotics libraries ship them.

Quaternions are ``(w, x, y, z)`` (MuJoCo's order) in the last dimension, rotating body-frame vectors
into the world frame. Every ``@torch.jit.script`` function here is compiled when this module is
imported, so a profiler that replaces ``torch.where`` (or any other torch function) with a Python
wrapper before the import makes that import fail — the reason this env exists in perfkit's tests.
"""

from __future__ import annotations

import math

import torch


@torch.jit.script
def normalize(x: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """``x`` scaled to unit L2 norm along the last dimension (``eps`` guards zero vectors)."""
    return x / x.norm(p=2.0, dim=-1, keepdim=True).clamp(min=eps)


@torch.jit.script
def wrap_to_pi(angles: torch.Tensor) -> torch.Tensor:
    """Angles mapped to ``(-pi, pi]``."""
    wrapped = torch.remainder(angles + math.pi, 2.0 * math.pi)
    # remainder maps +pi to -pi: keep +pi where the input was a positive odd multiple of pi
    return torch.where((wrapped == 0.0) & (angles > 0.0), torch.full_like(angles, math.pi), wrapped - math.pi)


@torch.jit.script
def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    return torch.cat((q[..., 0:1], -q[..., 1:4]), dim=-1)


@torch.jit.script
def quat_inv(q: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """The inverse rotation (conjugate over the squared norm)."""
    return quat_conjugate(q) / q.pow(2).sum(dim=-1, keepdim=True).clamp(min=eps)


@torch.jit.script
def quat_unique(q: torch.Tensor) -> torch.Tensor:
    """The one of ``q``/``-q`` (the same rotation) with a non-negative real part."""
    return torch.where(q[..., 0:1] < 0.0, -q, q)


@torch.jit.script
def quat_mul(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``q1 * q2`` (apply ``q2`` first, then ``q1``)."""
    w1, x1, y1, z1 = q1[..., 0], q1[..., 1], q1[..., 2], q1[..., 3]
    w2, x2, y2, z2 = q2[..., 0], q2[..., 1], q2[..., 2], q2[..., 3]
    w = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
    x = w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2
    y = w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2
    z = w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2
    return torch.stack((w, x, y, z), dim=-1)


@torch.jit.script
def quat_apply(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` ``[..., 3]`` by ``q`` ``[..., 4]``: ``v + 2 w (u x v) + 2 u x (u x v)``."""
    u = q[..., 1:4]
    w = q[..., 0:1]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


@torch.jit.script
def quat_apply_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v`` by the inverse of unit quaternion ``q`` (world frame -> body frame)."""
    u = q[..., 1:4]
    w = q[..., 0:1]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v - w * t + torch.cross(u, t, dim=-1)


@torch.jit.script
def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """The rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` as a quaternion."""
    cy, sy = torch.cos(yaw * 0.5), torch.sin(yaw * 0.5)
    cr, sr = torch.cos(roll * 0.5), torch.sin(roll * 0.5)
    cp, sp = torch.cos(pitch * 0.5), torch.sin(pitch * 0.5)
    qw = cy * cr * cp + sy * sr * sp
    qx = cy * sr * cp - sy * cr * sp
    qy = cy * cr * sp + sy * sr * cp
    qz = sy * cr * cp - cy * sr * sp
    return torch.stack((qw, qx, qy, qz), dim=-1)


@torch.jit.script
def euler_xyz_from_quat(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(roll, pitch, yaw)`` of ``q``, each in ``(-pi, pi]`` (pitch clamped to +-pi/2 at the poles)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    roll = torch.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = torch.asin((2.0 * (w * y - z * x)).clamp(-1.0, 1.0))
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return wrap_to_pi(roll), wrap_to_pi(pitch), wrap_to_pi(yaw)


@torch.jit.script
def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The heading part of ``q``: the rotation about world z alone."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    out = torch.zeros_like(q)
    out[..., 0] = torch.cos(yaw * 0.5)
    out[..., 3] = torch.sin(yaw * 0.5)
    return normalize(out)


@torch.jit.script
def heading_from_quat(q: torch.Tensor, forward_b: torch.Tensor) -> torch.Tensor:
    """Yaw of the body's forward axis ``forward_b`` ``[..., 3]`` in the world frame."""
    forward_w = quat_apply(q, forward_b)
    return torch.atan2(forward_w[..., 1], forward_w[..., 0])


def sample_uniform(lower, upper, size, device) -> torch.Tensor:
    """Uniform samples in ``[lower, upper)`` of shape ``size``; bounds may be floats or broadcastable tensors."""
    if isinstance(size, int):
        size = (size,)
    return torch.rand(*size, device=device) * (upper - lower) + lower
