"""Patching: replacing library attributes with hooks and putting every original back.

A hook family (:mod:`.torch_sync`, :mod:`.warp_sync`) declares its hooks as one table of
:class:`Patch` entries; installing the family, listing what it replaces (the restore check) and its
fixes in words are all derived from that table, so adding a hook is one line in one place.
"""

from __future__ import annotations

import contextlib
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
        (``from mujoco_warp import step`` made before the session began). Inside :meth:`batch` the
        other holders are replaced at the block's end, in one pass for all the calls."""
        old = getattr(owner, name)
        self.set(owner, name, new)
        if self._batch is not None:
            self._batch[id(old)] = (old, new, owner)
        else:
            self._replace_holders({id(old): (old, new, owner)})
        return new

    _batch: dict[int, tuple[Any, Any, Any]] | None = None  # id(old) -> (old, new, owner) while batching

    @contextlib.contextmanager
    def batch(self):
        """Within the block :meth:`set_everywhere` defers the other holders to one pass over the loaded
        modules' globals at its end (closing the discovery window wraps ~20 functions: a pass per call
        scanned ~2400 modules each time)."""
        if self._batch is not None:
            yield
            return
        self._batch = {}
        try:
            yield
        finally:
            pending, self._batch = self._batch, None
            if pending:
                self._replace_holders(pending)

    def _replace_holders(self, wanted: dict[int, tuple[Any, Any, Any]]) -> None:
        for mod in list(sys.modules.values()):
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict):
                continue
            for k, v in list(d.items()):
                w = wanted.get(id(v))
                if w is not None and v is w[0] and mod is not w[2]:
                    self.set(mod, k, w[1])

    def on_undo(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on :meth:`undo` (before the attributes are put back, in reverse order of adding)."""
        self._callbacks.append(fn)

    def undo(self) -> None:
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
