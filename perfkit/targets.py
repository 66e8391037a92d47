"""``module:attr`` targets — the one parser and resolver behind ``--step-fn``, ``[tool.perfkit]
segments`` and sweep factories (``perfkit.envs:make_env``)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


class TargetError(LookupError):
    """A ``module:attr`` target that is malformed or cannot be found; the message says which part."""


def parse(spec: str, what: str = "target") -> tuple[str, str]:
    """``"pkg.mod:Class.method"`` -> ``("pkg.mod", "Class.method")``; TargetError when malformed."""
    module, sep, dotted = str(spec).partition(":")
    if not sep or not module or not dotted or any(not p for p in dotted.split(".")):
        raise TargetError(f"{what} must look like module:attribute (e.g. mypkg.env:MyEnv.step), got {spec!r}")
    return module, dotted


def cwd_on_path() -> None:
    """Make modules in the working directory importable, as ``python -m`` does."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def resolve(module: str, dotted: str) -> tuple[Any, str, Any]:
    """``(owner, attribute name, current value)`` of ``module:dotted``; raises TargetError."""
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise TargetError(f"cannot import {module!r}: {e}") from None
    parts = dotted.split(".")
    owner = f"module {module!r}"
    for p in parts[:-1]:
        try:
            obj = getattr(obj, p)
        except AttributeError:
            raise TargetError(f"{module}:{dotted}: {owner} has no {p!r} (the class or object to find "
                              f"{'.'.join(parts[parts.index(p) + 1:])!r} on)") from None
        owner = f"{'class' if isinstance(obj, type) else type(obj).__name__} {p!r}"
    name = parts[-1]
    if not hasattr(obj, name):
        raise TargetError(f"{module}:{dotted}: {owner} has no attribute {name!r}")
    return obj, name, getattr(obj, name)


def load(spec: str, what: str = "target", callable_: bool = True) -> Any:
    """The object ``spec`` names (the working directory importable); TargetError when it is not
    there or, with ``callable_``, not callable."""
    module, dotted = parse(spec, what)
    cwd_on_path()
    _, _, value = resolve(module, dotted)
    if callable_ and not callable(value):
        raise TargetError(f"{what} {spec}: {type(value).__name__} is not callable")
    return value
