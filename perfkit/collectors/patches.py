"""Patching: replacing library attributes with hooks and putting every original back.

A hook family (:mod:`.torch_sync`, :mod:`.warp_sync`) declares its hooks as one table of
:class:`Patch` entries; installing the family, listing what it replaces (the restore check) and its
fixes in words are all derived from that table, so adding a hook is one line in one place.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

_MISSING = object()


class Patcher:
    """Replaces attributes and puts every original back, in reverse order, on :meth:`undo`."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []
        self._callbacks: list[Callable[[], None]] = []  # extra undo steps (registrations elsewhere)

    def set(self, owner: Any, name: str, new: Any) -> Any:
        old_own = vars(owner).get(name, _MISSING)
        setattr(owner, name, new)
        self._undo.append((owner, name, old_own))
        return new

    def set_item(self, namespace: dict, key: str, new: Any) -> Any:
        """Replace ``namespace[key]`` (a module's globals dict), put back on :meth:`undo`."""
        old = namespace.get(key, _MISSING)
        namespace[key] = new

        def restore() -> None:
            if old is _MISSING:
                namespace.pop(key, None)
            else:
                namespace[key] = old

        self.on_undo(restore)
        return new

    def set_everywhere(self, owner: Any, name: str, new: Any) -> Any:
        """Replace ``owner.name`` and every module global that holds the same object
        (``from mujoco_warp import step`` made before the session began)."""
        old = getattr(owner, name)
        self.set(owner, name, new)
        for mod, k in self._holders(old):
            if mod is not owner and getattr(mod, "__dict__", {}).get(k) is old:
                self.set(mod, k, new)
        return new

    _index: dict[int, list[tuple[Any, str]]] | None = None  # id(callable) -> (module, global name) holding it
    _indexed: Any = None  # names of the modules indexed

    def _holders(self, obj: Any) -> list[tuple[Any, str]]:
        """The module globals that held ``obj`` when their module was indexed: one index of every loaded
        module's callable globals, built at the first call and extended with the modules loaded since
        (a scan of all of ``sys.modules`` per wrapped function cost ~10 ms each on a real stack)."""
        if self._index is None:
            self._index, self._indexed = {}, set()
        index, indexed = self._index, self._indexed
        if len(indexed) != len(sys.modules):
            for mname, mod in list(sys.modules.items()):
                if mname in indexed:
                    continue
                indexed.add(mname)
                d = getattr(mod, "__dict__", None)
                if not isinstance(d, dict):
                    continue
                for k, v in list(d.items()):
                    if callable(v):
                        index.setdefault(id(v), []).append((mod, k))
        return index.get(id(obj), [])

    def on_undo(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on :meth:`undo` (before the attributes are put back, in reverse order of adding)."""
        self._callbacks.append(fn)

    def undo(self) -> None:
        self._index = None
        while self._callbacks:
            try:
                self._callbacks.pop()()
            except Exception:  # pragma: no cover - an undo step must not stop the others
                pass
        while self._undo:
            owner, name, old_own = self._undo.pop()
            try:
                if old_own is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, old_own)
            except (AttributeError, TypeError):  # pragma: no cover - owner gone or frozen
                pass

    def __len__(self) -> int:
        return len(self._undo)


def wraps(orig: Callable) -> Callable[[Callable], Callable]:
    """functools.wraps that also keeps the original reachable as ``__perfkit_wrapped__``."""

    def deco(fn: Callable) -> Callable:
        try:
            functools.update_wrapper(fn, orig)
        except (AttributeError, TypeError):
            pass
        fn.__perfkit_wrapped__ = orig  # type: ignore[attr-defined]
        return fn

    return deco


@dataclass(frozen=True)
class Patch:
    """One hooked attribute: ``<root module>.<owner>.<name>`` replaced by ``make(original, patch, root)``.

    ``op`` is what one call is reported as and ``fix`` the fix in words; a hook that reports several
    ops (``t[bool_mask] = v`` and ``t[list] = v``) lists the others in ``also``. ``when(args, kwargs)``
    narrows which calls count; ``chain`` marks ops whose result may feed ``.numpy()`` on the same line."""

    owner: str  # dotted path below the family's root module; "" for the root itself ("Tensor", "cuda.Event")
    name: str
    op: str
    fix: str
    make: Callable[..., Callable]
    when: Callable[[tuple, dict], bool] | None = None
    chain: bool = False
    also: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name


def owner_of(root: Any, dotted: str) -> Any:
    obj = root
    for part in filter(None, dotted.split(".")):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def install(patcher: Patcher, root: Any, table: Iterable[Patch]) -> list[str]:
    """Install every patch of ``table`` whose target exists; returns the keys installed."""
    done = []
    for p in table:
        owner = owner_of(root, p.owner)
        orig = getattr(owner, p.name, None) if owner is not None else None
        if orig is None:
            continue
        patcher.set(owner, p.name, p.make(orig, p, root))
        done.append(p.key)
    return done


def originals(root: Any, table: Iterable[Patch]) -> dict[str, Any]:
    """``{key: current attribute}`` of every patch target that exists (the restore check compares
    this before and after a session)."""
    out = {}
    for p in table:
        owner = owner_of(root, p.owner)
        if owner is not None and hasattr(owner, p.name):
            out[p.key] = getattr(owner, p.name)
    return out


def fixes(table: Iterable[Patch]) -> dict[str, str]:
    """``{op: fix}`` of every op the table's hooks report."""
    out: dict[str, str] = {}
    for p in table:
        out.setdefault(p.op, p.fix)
        for op, fix in p.also.items():
            out.setdefault(op, fix)
    return out
