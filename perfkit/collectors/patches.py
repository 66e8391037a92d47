"""Patching: replacing library attributes with hooks and putting every original back; the
vocabulary of sync ops the hooks report.

A hook family (:mod:`.torch_sync`, :mod:`.warp_sync`) declares its hooks as one table of
:class:`Patch` entries, each reporting one or more :class:`SyncOp` (its label, what kind of sync it
is, its fix in words and the lint rule that finds it statically). Installing the family, listing
what it replaces (the restore check), its fixes, the cost model's price kind and the console's lint
cross-reference are all derived from that table, so adding a hook is one row in one place.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, get_args

_MISSING = object()


class Patcher:
    """Replaces attributes and puts every original back, in reverse order, on :meth:`undo`."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []
        self._callbacks: list[Callable[[], None]] = []  # extra undo steps (registrations elsewhere)
        # id(new) -> (new, old) of every set_everywhere: a module imported while the patch was in place
        # took the new object from its owner (``from mujoco import mj_step``); undo puts the old one back there
        self._spread: dict[int, tuple[Any, Any]] = {}
        self._first_pass: set[int] | None = None  # ids of the modules loaded at the first pass over them

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
        self._spread[id(new)] = (new, old)
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
        mods = list(sys.modules.values())
        if self._first_pass is None:
            self._first_pass = {id(m) for m in mods}
        for mod in mods:
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
        spread, self._spread = self._spread, {}
        first, self._first_pass = self._first_pass, None
        if spread:
            for key, (new, old) in list(spread.items()):
                for _ in range(len(spread)):  # a replacement replaced again: back to the first original
                    w = spread.get(id(old))
                    if w is None or w[0] is not old:
                        break
                    old = w[1]
                spread[key] = (new, old)
            self._put_back(spread, first or set())

    @staticmethod
    def _put_back(spread: dict[int, tuple[Any, Any]], seen: set[int]) -> None:
        """A global still holding a replacement gets the original back, in the modules loaded since the
        first pass (``seen``: those were there at every pass, which replaced their holders on the record)."""
        for mod in list(sys.modules.values()):
            if id(mod) in seen:
                continue
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict):
                continue
            for k, v in list(d.items()):
                w = spread.get(id(v))
                if w is not None and v is w[0]:
                    d[k] = w[1]

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


SyncKind = Literal["d2h copy", "h2d copy", "data-dependent shape", "scalar read", "device-wide wait"]
SYNC_KINDS: tuple[str, ...] = get_args(SyncKind)
# what a sync of each kind costs beyond the round trip every sync pays (perfkit.pricing.cost)
PRICE_KINDS: dict[str, str] = {
    "d2h copy": "d2h",  # + a device-to-host copy of the bytes
    "h2d copy": "h2d",  # + a host-to-device copy of the bytes
    "data-dependent shape": "round trip",
    "scalar read": "round trip",
    "device-wide wait": "round trip",
}


@dataclass(frozen=True)
class SyncOp:
    """One sync op as every part of perfkit names it: ``label`` is what a finding's ``op`` says,
    ``kind`` what it makes the GPU do (one of :data:`SYNC_KINDS`), ``fix`` the fix in words (a
    finding's message) and ``lint_rule`` the static rule that finds the same pattern (``"PK101"``;
    None where the linter has none: a gap the report names)."""

    label: str
    kind: SyncKind
    fix: str
    lint_rule: str | None

    @property
    def price(self) -> str:
        """The cost model's price kind: ``"d2h"``, ``"h2d"`` or ``"round trip"``."""
        return PRICE_KINDS[self.kind]


@dataclass(frozen=True)
class Patch:
    """One hooked attribute: ``<root module>.<owner>.<name>`` replaced by ``make(original, patch, root)``.

    ``op`` is what one call is reported as; a hook that reports several ops (``t[bool_mask] = v`` and
    ``t[list] = v``) lists the others in ``also``. ``always``: every call the hook counts on a device
    tensor makes the CUDA runtime wait, whatever its arguments' devices, sizes or memory (``.item()``);
    False where the hook decides from the call (``.to``, ``copy_``, indexing): on CUDA those can be left
    to the runtime's own sync report and only the always rows installed (:func:`install`
    ``always_only``). ``when(args, kwargs)`` narrows which calls count; ``chain`` marks ops whose
    result may feed ``.numpy()`` on the same line."""

    owner: str  # dotted path below the family's root module; "" for the root itself ("Tensor", "cuda.Event")
    name: str
    op: SyncOp
    make: Callable[..., Callable]
    always: bool
    when: Callable[[tuple, dict], bool] | None = None
    chain: bool = False
    also: tuple[SyncOp, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name

    @property
    def ops(self) -> tuple[SyncOp, ...]:
        return (self.op, *self.also)


def owner_of(root: Any, dotted: str) -> Any:
    obj = root
    for part in filter(None, dotted.split(".")):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _rows(table: Iterable[Patch], always_only: bool) -> Iterable[Patch]:
    return (p for p in table if p.always or not always_only)


def install(patcher: Patcher, root: Any, table: Iterable[Patch], always_only: bool = False) -> list[str]:
    """Install every patch of ``table`` whose target exists (only the :attr:`Patch.always` rows with
    ``always_only``); returns the keys installed."""
    done = []
    for p in _rows(table, always_only):
        owner = owner_of(root, p.owner)
        orig = getattr(owner, p.name, None) if owner is not None else None
        if orig is None:
            continue
        patcher.set(owner, p.name, p.make(orig, p, root))
        done.append(p.key)
    return done


def originals(root: Any, table: Iterable[Patch], always_only: bool = False) -> dict[str, Any]:
    """``{key: current attribute}`` of every patch target that exists (the restore check compares
    this before and after a session)."""
    out = {}
    for p in _rows(table, always_only):
        owner = owner_of(root, p.owner)
        if owner is not None and hasattr(owner, p.name):
            out[p.key] = getattr(owner, p.name)
    return out


def sync_ops(table: Iterable[Patch]) -> dict[str, SyncOp]:
    """``{label: SyncOp}`` of every op the table's hooks report (a label two rows share, such as
    ``.nonzero()`` for the method and the function, is one op)."""
    out: dict[str, SyncOp] = {}
    for p in table:
        for op in p.ops:
            if out.setdefault(op.label, op) != op:
                raise ValueError(f"two different descriptions of sync op {op.label!r}")
    return out
