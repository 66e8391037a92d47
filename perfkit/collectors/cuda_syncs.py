"""Syncs as the CUDA runtime makes them: torch's own sync detection turned into counted events.

With ``torch.cuda.set_sync_debug_mode("warn")`` torch issues one warning, ``"called a synchronizing CUDA
operation"``, at every call that makes the host wait for the device (``memcpy_and_sync``,
``stream_synchronize``: an ``.item()``, a mask read, a blocking host→device copy of a list or numpy
index, ``torch.distributions``' argument checks, ...), from C++, after the op, in the thread and Python
frame that called it. Measured on the H200 (torch 2.11, ``scripts/gpu/sync_debug_check.py``): for 29 op
classes one warning per runtime ``cudaStreamSynchronize`` exactly, none for calls that do not sync (a
tensor index read, a slice, a fill, a same-device ``.to``, a non-blocking copy into pinned memory, an empty
``torch.tensor([])``); explicit ``torch.cuda.synchronize()`` / ``Event.synchronize()`` are not warned
(perfkit's API hooks count those). A warned sync costs ~9 µs more than a plain one (26 vs 17 µs for an
``.item()``); a call that does not sync costs nothing extra — no Python runs for it.

So on a CUDA run perfkit needs no Python hook on ops that only *sometimes* sync (indexing, ``.to``,
``.copy_``, ``torch.tensor``): :class:`RuntimeSyncs` catches the warning (``warnings._showwarnmsg``, before
any filter of the user's own ``showwarning``), and

* inside a hooked call (``tls.depth`` > 0: an ``.item()`` whose hook gives the op its label and times its
  wait) it adds to ``tls.runtime_syncs``, so the hook counts the call only if the runtime synced;
* elsewhere it reports one sync at the first reportable frame, labelled from the expression the
  calling frame was executing (:func:`op_label`: the instruction's source span, Python 3.11+).

The user's own sync-debug mode is left alone: if one is set, perfkit does not install this and the
Python hooks count as before.
"""

from __future__ import annotations

import ast
import dis
import linecache
import sys
import warnings
from types import CodeType, FrameType
from typing import Any, Callable

from perfkit.collectors.patches import SyncOp

MESSAGE = "called a synchronizing CUDA operation"

# The ops a runtime-reported sync can be named as, beyond the hook tables' own labels: with no hook on the
# call, its expression says what it was, not always which variant (a list, numpy or mask index read).
RUNTIME_OPS: dict[str, SyncOp] = {op.label: op for op in (
    SyncOp("t[...]", "data-dependent shape",
           "an index read the runtime waited for (a boolean mask, or a list / numpy array / host tensor of indices "
           "copied to the device): keep shapes fixed with torch.where / masked ops, keep index tensors on the "
           "device", "PK107"),
    SyncOp("t[...] = v", "h2d copy",
           "an index write the runtime waited for (a Python scalar through an index tensor or an int, or host "
           "indices): write a device tensor, or use masked_fill_ / index_fill_ / torch.where", "PK113"),
    SyncOp(".to(...)", "d2h copy",
           "a blocking copy between host and device: keep the data on the device, or copy non_blocking into "
           "pinned memory and read it a step later", "PK102"),
    SyncOp(".copy_(...)", "d2h copy",
           "a blocking copy between host and device: copy non_blocking into pinned memory and read it a step "
           "later", None),
    SyncOp("sync (runtime)", "scalar read",
           "a call the CUDA runtime waited for (its line shows which): keep the value on the device", None),
)}
# an expression's label -> the hook tables' label of the same op
_TABLE_LABELS = {
    "torch.tensor()": "torch.tensor(list, device=cuda)", "torch.as_tensor()": "torch.tensor(list, device=cuda)",
    "torch.where()": "torch.where(cond)", "bool()": "bool(t)", "float()": "float(t)", "int()": "int(t)",
    "print()": "print(t)", "format()": "format(t)", "repr()": "repr(t)", "str()": "format(t)",
    "np.asarray()": "np.asarray(t)", "np.array()": "np.asarray(t)", "numpy.asarray()": "np.asarray(t)",
    "torch.equal()": "torch.equal", "torch.allclose()": "torch.allclose", ".to()": ".to(...)",
    ".copy_()": ".copy_(...)", "f-string of t": "format(t)",
}


class RuntimeSyncs:
    """Installs the sync-debug mode and the warning catcher: ``report(frame)`` gets each sync made
    outside any hook (``frame``: the one that made the call; :func:`sync_label` names it),
    ``inside_hook()`` says whether a hook is running on this thread and ``count_in_hook()`` adds a
    runtime sync to that hook's call."""

    def __init__(self, report: Callable[[FrameType], None], inside_hook: Callable[[], bool],
                 count_in_hook: Callable[[], None]) -> None:
        self._report = report
        self._inside = inside_hook
        self._count_in_hook = count_in_hook
        self._torch: Any = None
        self.installed = False

    def install(self, patcher: Any, torch: Any) -> bool:
        """Turn torch's sync detection on (undone by ``patcher``); False where the user set a mode."""
        try:
            prev = get_mode(torch)
        except Exception:
            return False
        if prev != 0:
            return False
        original = warnings._showwarnmsg  # type: ignore[attr-defined]
        show = self._showwarnmsg(original)
        warnings.filterwarnings("always", message=MESSAGE, category=UserWarning)
        added = warnings.filters[0]
        set_mode(torch, WARN)
        patcher.set(warnings, "_showwarnmsg", show)

        def restore() -> None:
            set_mode(torch, prev)
            try:
                warnings.filters.remove(added)
            except ValueError:
                pass
            mutated = (getattr(warnings, "_filters_mutated", None)
                       or getattr(warnings, "_filters_mutated_lock_held", None))
            if mutated is not None:
                try:
                    mutated()
                except Exception:  # pragma: no cover - older or newer warnings internals
                    pass

        patcher.on_undo(restore)
        self._torch = torch
        self.installed = True
        return True

    def pause(self) -> bool:
        """Turn the runtime's detection off (no warning, no cost at a sync) until :meth:`resume`."""
        try:
            set_mode(self._torch, 0)
        except Exception:  # pragma: no cover - the mode could be set on install: it can be set again
            return False
        return True

    def resume(self) -> None:
        set_mode(self._torch, WARN)

    def _showwarnmsg(self, original: Callable) -> Callable:
        """``warnings._showwarnmsg`` that keeps the runtime's sync reports and passes every other on."""
        report, inside, count_in_hook = self._report, self._inside, self._count_in_hook

        def showwarnmsg(msg: Any) -> None:
            if msg.category is UserWarning and str(msg.message).startswith(MESSAGE):  # + " (Triggered internally at ...)"
                try:
                    if inside():
                        count_in_hook()
                    else:
                        report(sys._getframe(1))
                except Exception:  # pragma: no cover - instrumentation must never break the program
                    pass
                return
            original(msg)

        return showwarnmsg


WARN = 1  # torch's sync-debug mode "warn" ("default" is 0, "error" 2)


def get_mode(torch: Any) -> int:
    """torch's sync-debug mode, read without initialising CUDA: ``torch.cuda.get_sync_debug_mode()`` (and
    its setter) first make a CUDA context on the current device — at a session's start, before the
    program chose its device, that is GPU 0 for every rank of a job. The mode is a flag of torch's, no
    device state; its own binding reads it as is."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_get_sync_debug_mode", None)
    return raw() if raw is not None else torch.cuda.get_sync_debug_mode()


def set_mode(torch: Any, mode: int) -> None:
    """Set torch's sync-debug mode (0, :data:`WARN`) without initialising CUDA (:func:`get_mode`), and
    without torch's warning that the mode is a prototype."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_set_sync_debug_mode", None)
    _quietly(raw if raw is not None else torch.cuda.set_sync_debug_mode, mode)


def _quietly(fn: Callable, *args: Any) -> None:
    """Call ``fn`` without the warning torch gives on setting the mode ("a prototype feature"): perfkit's
    switch is not the program's, and its stderr must stay as it is without perfkit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(*args)


# ---- labels: which expression made the sync -----------------------------------------------------------

# (id(code), instruction offset) -> (code, label): by the code's identity (its own hash reads its whole
# contents, ~1 µs for a large function), the code kept so that its id is not reused
_labels: dict[tuple[int, int], tuple[CodeType, str]] = {}


def op_label(frame: FrameType) -> str:
    """A short label of what ``frame`` was executing when it synced (``.item()``, ``t[...]``,
    ``t[...] = v``, ``bool(t)``, ``torch.tensor()``), cached per code object and instruction."""
    code, lasti = frame.f_code, frame.f_lasti
    hit = _labels.get((id(code), lasti))
    if hit is None:
        hit = _labels[(id(code), lasti)] = (code, _label_of(code, lasti))
    return hit[1]


def sync_label(frame: FrameType, known: Callable[[str], bool]) -> str:
    """:func:`op_label` in the vocabulary of sync ops: the hook tables' label where the expression names
    one of their ops (``torch.nonzero()`` is ``.nonzero()``), else one of :data:`RUNTIME_OPS`."""
    label = op_label(frame)
    label = _TABLE_LABELS.get(label, label)
    if known(label) or label in RUNTIME_OPS:
        return label
    if label.startswith("torch.") and label.endswith("()"):
        method = "." + label[len("torch."):]
        if known(method):
            return method
    return "sync (runtime)"


def _label_of(code: CodeType, lasti: int) -> str:
    try:
        opname = dis.opname[code.co_code[lasti]]
    except (IndexError, TypeError):
        opname = ""
    expr = _expression_at(code, lasti)
    if opname == "STORE_SUBSCR" or (isinstance(expr, ast.Subscript) and opname.startswith("STORE")):
        return _write_label(code, lasti, expr)
    if isinstance(expr, ast.Call):
        return _call_label(expr.func)
    if isinstance(expr, ast.Subscript):
        return _index_label(expr.slice) or "t[...]"
    if opname.startswith(("POP_JUMP", "TO_BOOL", "JUMP_IF", "UNARY_NOT")):
        return "bool(t)"
    if opname in ("FORMAT_VALUE", "FORMAT_SIMPLE", "CONVERT_VALUE"):
        return "f-string of t"
    if isinstance(expr, (ast.BinOp, ast.Compare, ast.UnaryOp)):
        return "t op scalar"
    return "sync (runtime)"


def _index_label(index: ast.expr) -> str | None:
    """``t[list]`` / ``t[bool_mask]`` where the index's own expression says which, else None."""
    if isinstance(index, ast.List):
        return "t[list]"
    if isinstance(index, ast.Compare) or (isinstance(index, ast.UnaryOp) and isinstance(index.op, (ast.Invert, ast.Not))) \
            or (isinstance(index, ast.BinOp) and isinstance(index.op, (ast.BitAnd, ast.BitOr, ast.BitXor))):
        return "t[bool_mask]"
    name = index.id if isinstance(index, ast.Name) else index.attr if isinstance(index, ast.Attribute) else ""
    if "mask" in name.lower():
        return "t[bool_mask]"
    return None


def _write_label(code: CodeType, lasti: int, target: ast.AST | None) -> str:
    """An index write: ``t[idx] = scalar`` / ``t[i] = scalar`` when the statement assigns a number,
    ``t[bool_mask] = v`` / ``t[list] = v`` by the index, else ``t[...] = v``."""
    index = target.slice if isinstance(target, ast.Subscript) else None
    label = _index_label(index) if index is not None else None
    if label == "t[list]":  # as the hooks name it, whatever it assigns (torch_sync's list check comes first)
        return "t[list] = v"
    stmt = _statement_at(code, lasti)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, (int, float)):
        single = isinstance(index, ast.Constant) and isinstance(index.value, int)
        return "t[i] = scalar" if single else "t[idx] = scalar"
    return f"{label} = v" if label else "t[...] = v"


def _position(code: CodeType, lasti: int) -> tuple:
    """``(line, end line, column, end column)`` of the instruction at ``lasti`` (Python 3.11+;
    ``(None,) * 4`` where unknown)."""
    positions = getattr(code, "co_positions", None)
    try:
        return tuple(list(positions())[lasti // 2]) if positions is not None else (None,) * 4
    except IndexError:
        return (None,) * 4


def _statement_at(code: CodeType, lasti: int) -> ast.stmt | None:
    """The one-line statement holding the instruction at ``lasti`` (None where it spans lines)."""
    line = _position(code, lasti)[0]
    if line is None:
        return None
    try:
        body = ast.parse(linecache.getline(code.co_filename, line).strip()).body
    except SyntaxError:
        return None
    return body[0] if len(body) == 1 else None


def _call_label(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        base = func.value
        if isinstance(base, ast.Name) and base.id in ("torch", "np", "numpy", "wp", "warp"):
            return f"{base.id}.{func.attr}()"
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "torch":
            return f"torch.{base.attr}.{func.attr}()"
        return f".{func.attr}()"
    if isinstance(func, ast.Name):
        return f"{func.id}()"
    return "call()"


def _expression_at(code: CodeType, lasti: int) -> ast.AST | None:
    """The AST node of the source span of the instruction at ``lasti`` (Python 3.11+), else None."""
    line, end_line, col, end_col = _position(code, lasti)
    if line is None or end_line is None or col is None or end_col is None:
        return None
    lines = [linecache.getline(code.co_filename, n).encode() for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return None
    if len(lines) == 1:
        text = lines[0][col:end_col]
    else:
        text = lines[0][col:] + b"".join(lines[1:-1]) + lines[-1][:end_col]
    try:
        return ast.parse(text.decode().strip(), mode="eval").body
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
