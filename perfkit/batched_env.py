"""The batched-env contract perfkit relies on, in code: what makes an object an env, and the one
description of it that every record (profile, sweep point) carries.

An env is anything with an integer ``num_envs`` (instance attribute, property or class attribute)
and a ``step(actions)`` method that advances all ``num_envs`` worlds at once — rsl_rl's ``VecEnv``,
an Isaac-Lab-style manager env, a gymnasium vector env, perfkit's own reference env. Everything
else is optional and, where present, lands in the record's ``env`` block (:func:`describe_env`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

# Optional settings an env may expose; scalars among them are copied into the record's env block
# (its num_envs is the record's own ``num_envs``, not repeated there).
ENV_FIELDS = ("name", "backend", "sim_dt", "decimation", "policy_dt", "obs_dim", "act_dim",
              "max_episode_steps", "max_episode_length")


@runtime_checkable
class BatchedEnv(Protocol):
    """What perfkit needs of a batched env (the optional fields are listed in :data:`ENV_FIELDS`; ``num_envs``
    is the record's own field)."""

    num_envs: int

    def step(self, actions: Any) -> Any: ...


WRAPPED_ATTRS = ("unwrapped", "env", "venv", "_env")  # where wrappers keep the env they wrap
MAX_WRAPPERS = 6


def wrapped_chain(obj: Any) -> list[Any]:
    """``obj`` and the envs it wraps, outermost first (gymnasium's ``env``/``unwrapped``, SB3's ``venv``,
    an rsl_rl-style wrapper's ``env``), at most :data:`MAX_WRAPPERS` deep."""
    out: list[Any] = []
    while obj is not None and len(out) < MAX_WRAPPERS and all(o is not obj for o in out):
        out.append(obj)
        inner = None
        for attr in WRAPPED_ATTRS:
            try:
                inner = getattr(obj, attr, None)
            except Exception:
                inner = None
            if inner is not None and inner is not obj and not callable(getattr(inner, "__func__", None)):
                break
            inner = None
        obj = inner
    return out


def _int_num_envs(obj: Any) -> int | None:
    try:
        n = getattr(obj, "num_envs", None)
    except Exception:
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def num_envs_of(obj: Any) -> int | None:
    """The integer ``num_envs`` of an env object (instance or class attribute, or a property), else of the
    env it wraps (:func:`wrapped_chain`), else None."""
    if obj is None:
        return None
    n = _int_num_envs(obj)
    if n is not None:
        return n
    for inner in wrapped_chain(obj)[1:]:
        n = _int_num_envs(inner)
        if n is not None:
            return n
    return None


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
    chain = wrapped_chain(env)
    for name in ENV_FIELDS:
        for obj in chain:  # a wrapper's own setting first, else the wrapped env's
            try:
                v = _scalar(getattr(obj, name, None))
            except Exception:
                v = None
            if v is not None:
                info[name] = v
                break
    if "policy_dt" not in info and isinstance(info.get("sim_dt"), (int, float)) and isinstance(info.get("decimation"), int):
        info["policy_dt"] = info["sim_dt"] * info["decimation"]
    device = None
    for obj in chain:
        try:
            device = getattr(obj, "device", None)
        except Exception:
            device = None
        if device is not None:
            break
    info["device"] = str(device) if device is not None else "cpu"
    try:
        info["rendering"] = bool(getattr(env, "rendering", False) or getattr(env, "render_mode", None))
    except Exception:
        info["rendering"] = False
    info["type"] = f"{type(env).__module__}.{type(env).__qualname__}"
    return info
