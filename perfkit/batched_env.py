"""The batched-env contract perfkit relies on, in code: what makes an object an env, and the one
description of it that every record (profile, sweep point) carries.

An env is anything with an integer ``num_envs`` (instance attribute, property or class attribute)
and a ``step(actions)`` method that advances all ``num_envs`` worlds at once — rsl_rl's ``VecEnv``,
an Isaac-Lab-style manager env, a gymnasium vector env, perfkit's own reference env. Everything
else is optional and, where present, lands in the record's ``env`` block (:func:`describe_env`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

# Optional settings an env may expose; scalars among them are copied into the record's env block.
ENV_FIELDS = ("name", "backend", "num_envs", "sim_dt", "decimation", "policy_dt", "obs_dim", "act_dim",
              "max_episode_steps", "max_episode_length")


@runtime_checkable
class BatchedEnv(Protocol):
    """What perfkit needs of a batched env (the optional fields are listed in :data:`ENV_FIELDS`)."""

    num_envs: int

    def step(self, actions: Any) -> Any: ...


def num_envs_of(obj: Any) -> int | None:
    """The integer ``num_envs`` of an env object (instance or class attribute, or a property), else None."""
    if obj is None:
        return None
    try:
        n = getattr(obj, "num_envs", None)
    except Exception:
        return None
    if isinstance(n, bool) or not isinstance(n, int):
        return None
    return n


def _scalar(v: Any) -> Any:
    """A plain scalar for the record, or None: a Python scalar as is, a one-element tensor/array read
    once (perfkit's own set-up read, when the env is first seen), anything else dropped (a per-env
    counter tensor is not a setting)."""
    if isinstance(v, (bool, int, float, str)):
        return v
    dim = getattr(v, "dim", None)
    if v is not None and hasattr(v, "item") and callable(dim):
        try:
            if dim() == 0:  # a 0-d tensor/array; a per-env buffer (even of one env) is not a setting
                return v.item()  # perfkit: ignore[PK101] once, when the env is first seen
        except Exception:
            return None
    return None


def describe_env(env: Any) -> dict[str, Any]:
    """The record's ``env`` block: the scalar settings of :data:`ENV_FIELDS`, ``policy_dt`` derived
    from ``sim_dt * decimation`` when absent, the device, whether it renders, and its type."""
    info: dict[str, Any] = {}
    for name in ENV_FIELDS:
        try:
            v = _scalar(getattr(env, name, None))
        except Exception:
            v = None
        if v is not None:
            info[name] = v
    if "policy_dt" not in info and isinstance(info.get("sim_dt"), (int, float)) and isinstance(info.get("decimation"), int):
        info["policy_dt"] = info["sim_dt"] * info["decimation"]
    try:
        device = getattr(env, "device", None)
    except Exception:
        device = None
    info["device"] = str(device) if device is not None else "cpu"
    try:
        info["rendering"] = bool(getattr(env, "rendering", False) or getattr(env, "render_mode", None))
    except Exception:
        info["rendering"] = False
    info["type"] = f"{type(env).__module__}.{type(env).__qualname__}"
    return info
