"""Sync hooks for torch: every call that needs a device value on the host.

Only the synchronizing entry points are wrapped (they are rare by nature, so the wrappers cost nothing
in a sync-free loop); the single exception is ``Tensor.__getitem__``, whose wrapper is a couple of
type checks before the original runs (boolean-mask reads and Python-list indices are syncs).

Counting rules (what the tests pin down):

* one call is one event: a hook that runs while another hook is already running on the same thread
  counts nothing (``print(t)`` is one ``print(t)``, not ``__repr__`` + ``.item()`` + ``.tolist()``);
* on a CUDA tensor the call is a sync wherever it comes from, attributed to the first user frame;
* on a CPU tensor, when ``hub.count_cpu`` is set (the default on a machine without CUDA), the call is a
  *would-sync-on-GPU* event, but only where user code made the call itself: torch's own ``.item()`` on
  its CPU bookkeeping tensors (optimizer step counters, ...) is not the user's sync;
* ``t.cpu().numpy()`` on one line is one event: on a GPU the ``.cpu()`` syncs and the ``.numpy()`` of
  the host copy does not; on a CPU tensor the ``.numpy()`` (``.tolist()``, ``np.asarray``) of the very
  tensor ``.cpu()`` just returned (held by a weak reference: a recycled id never matches), on the same
  line of the same frame, is not counted again. (``.cpu().detach().numpy()`` counts two on a CPU-only
  machine: the ``detach`` hides the chain.)
* writing a Python scalar through an index syncs on CUDA: torch makes the scalar a host tensor and
  copies it to the device — ``x[idx] = 0.0`` with an index tensor (``index_put_``), and ``x[5] = 0.0``
  where the indexed element is a single value (a copy into a 0-d view); writing into a slice or a row
  (``x[:, 0] = 1.0``, ``x[5] = 0.0`` on a 2-d ``x``) is a fill, and ``x[mask] = 0.0`` a masked fill:
  neither syncs (measured on the H200, torch 2.11).
"""

from __future__ import annotations

import numbers
import sys
import weakref
from typing import Any, Callable

from perfkit.collectors.sites import reportable
from perfkit.source import source_line
from perfkit.collectors import hub
from perfkit.collectors.hub import api_sync_hook, direct_caller, sync_call, tls
from perfkit.collectors.patches import Patch, Patcher, wraps
from perfkit.collectors.patches import fixes as _fixes
from perfkit.collectors.patches import install as _install
from perfkit.collectors.patches import originals as _originals

def _counts_cpu() -> bool:
    return hub.count_cpu


def sync_hook(orig: Callable, op: str, when: Callable[[tuple, dict], bool] | None = None, chain: bool = False) -> Callable:
    """Wrap a method whose first argument is the tensor: count one sync per call (see module doc).

    ``when(args, kwargs)`` says whether this particular call syncs (e.g. ``torch.where`` with one
    argument); ``chain`` marks ops whose result may feed ``.numpy()/.tolist()`` on the same line."""
    sinks, state = hub.sinks, tls
    consumes = op in _CHAIN_CONSUMERS

    @wraps(orig)
    def hook(*args, **kwargs):
        if not sinks or state.depth or hub.is_compiling() or (when is not None and not when(args, kwargs)):
            return orig(*args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        t = args[0] if args else None
        cuda = getattr(t, "is_cuda", False)
        if not cuda:
            if not hub.count_cpu or not reportable(caller.f_code.co_filename):
                return orig(*args, **kwargs)
            if consumes and _chained(state, caller, t):
                return orig(*args, **kwargs)  # the .numpy() of `t.cpu().numpy()`: counted at .cpu()
        out = sync_call(orig, _op_name(op, caller), caller, args, kwargs, would=not cuda)
        if chain and not cuda:
            _remember_chain(state, caller, out)
        return out

    return hook


_CHAIN_CONSUMERS = frozenset({".numpy()", ".tolist()", "np.asarray(t)"})


def _remember_chain(state: Any, caller: Any, out: Any) -> None:
    """``out`` was just returned by a counted ``.cpu()``/``.to("cpu")`` at ``caller``'s line."""
    try:
        state.last_cpu = (id(caller), caller.f_lineno, weakref.ref(out))
    except TypeError:  # not weak-referenceable: no chain
        state.last_cpu = None


def _chained(state: Any, caller: Any, t: Any) -> bool:
    """Whether ``t`` is the very host copy the last counted ``.cpu()`` returned on this line of this frame."""
    last = state.last_cpu
    if last is None or last[0] != id(caller) or last[1] != caller.f_lineno or last[2]() is not t:
        return False
    state.last_cpu = None
    return True


_print_lines: dict[tuple[str, int], bool] = {}


def _op_name(op: str, caller) -> str:
    if op != "repr(t)":
        return op
    key = (caller.f_code.co_filename, caller.f_lineno)
    p = _print_lines.get(key)
    if p is None:
        p = _print_lines[key] = "print(" in source_line(*key)
    return "print(t)" if p else op


_PLAIN_INDEX = (slice, int, type(None), type(Ellipsis))  # index parts that never sync
_SCALARS = (int, float, bool)


def _index_op(idx: Any, Tensor: type, bool_dtypes: tuple) -> str | None:
    tp = type(idx)
    if tp is list:
        return "t[list]"
    if tp is tuple:
        for e in idx:
            te = type(e)
            if te is list:
                return "t[list]"
            if te in _PLAIN_INDEX:
                continue
            if isinstance(e, Tensor) and e.dtype in bool_dtypes:
                return "t[bool_mask]"
        return None
    if isinstance(idx, Tensor) and idx.dtype in bool_dtypes:
        return "t[bool_mask]"
    return None


def _plain_tuple(idx: tuple) -> bool:
    for e in idx:
        if type(e) not in _PLAIN_INDEX:
            return False
    return True


def _getitem_hook(orig: Callable, Tensor: type, bool_dtypes: tuple) -> Callable:
    """Reads through a boolean mask (a data-dependent shape: nonzero) or a Python list (copied to the
    device). This hook runs for every index in the program, so the indices that never sync (ints,
    slices and tuples of them) leave after a type check."""
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def __getitem__(self, idx):
        tp = type(idx)
        if tp in _PLAIN_INDEX or (tp is tuple and _plain_tuple(idx)) or not sinks or state.depth:
            return orig(self, idx)
        op = _index_op(idx, Tensor, bool_dtypes)
        if op is not None and not hub.is_compiling():
            caller = direct_caller(sys._getframe(1))
            cuda = self.is_cuda
            if cuda or (hub.count_cpu and reportable(caller.f_code.co_filename)):
                return sync_call(orig, op, caller, (self, idx), {}, would=not cuda)
        return orig(self, idx)

    return __getitem__


def _is_scalar(value: Any, Tensor: type, target: Any = None) -> bool:
    """A Python number, or — written into a CUDA ``target`` — a 0-d host tensor: what torch turns into a
    host tensor and copies over. (On a CPU-only run a tensor value is taken to live where the target
    would, on the device: a would-sync only for Python numbers.)"""
    if type(value) in _SCALARS:
        return True
    if isinstance(value, Tensor):
        if target is None:
            return False
        tls.depth += 1  # these queries are perfkit's, not the program's ops
        try:
            return target.is_cuda and not value.is_cuda and value.dim() == 0
        finally:
            tls.depth -= 1
    return isinstance(value, numbers.Number)


def _setitem_op(self: Any, idx: Any, value: Any, Tensor: type, bool_dtypes: tuple) -> str | None:
    """The sync ``self[idx] = value`` makes (see module doc), or None. One pass over the index, no
    generator, no ``isinstance`` on the common parts: this runs for every item assignment."""
    tp = type(idx)
    if tp is int:
        return "t[i] = scalar" if _is_scalar(value, Tensor, self) and _ndim(self) == 1 else None
    if tp is tuple:
        all_int, index_tensor = True, False
        for e in idx:
            te = type(e)
            if te is int:
                continue
            all_int = False
            if te in _PLAIN_INDEX:
                continue
            if te is list:
                return "t[list] = v"
            if isinstance(e, Tensor):
                if e.dtype in bool_dtypes:
                    return None if _is_scalar(value, Tensor, self) else "t[bool_mask] = v"  # a scalar: masked_fill_
                index_tensor = True
        if not _is_scalar(value, Tensor, self):
            return None
        if index_tensor:
            return "t[idx] = scalar"
        if all_int and len(idx) == _ndim(self):
            return "t[i] = scalar"  # every dim indexed by an int: a 0-d target
        return None
    if tp is list:
        return "t[list] = v"
    if isinstance(idx, Tensor):
        if idx.dtype in bool_dtypes:
            return None if _is_scalar(value, Tensor, self) else "t[bool_mask] = v"
        return "t[idx] = scalar" if _is_scalar(value, Tensor, self) else None
    return None


def _ndim(t: Any) -> int:
    """``t.dim()`` without it counting as the program's op while allocations are sampled."""
    tls.depth += 1
    try:
        return t.dim()
    finally:
        tls.depth -= 1


def _setitem_hook(orig: Callable, Tensor: type, bool_dtypes: tuple) -> Callable:
    """``t[bool_mask] = values``: index_put_ reads the mask back (nonzero); ``t[list] = values`` copies
    the list to the device; a Python scalar written through an index tensor or into a single element
    is copied host-to-device (see module doc). ``t[bool_mask] = scalar`` (masked_fill_), writes into
    slices and rows, and device values through an index tensor are not counted. Slices leave at once."""
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def __setitem__(self, idx, value):
        if type(idx) is slice or not sinks or state.depth:
            return orig(self, idx, value)
        op = _setitem_op(self, idx, value, Tensor, bool_dtypes)
        if op is not None and not hub.is_compiling():
            caller = direct_caller(sys._getframe(1))
            cuda = self.is_cuda
            if cuda or (hub.count_cpu and reportable(caller.f_code.co_filename)):
                return sync_call(orig, op, caller, (self, idx, value), {}, would=not cuda)
        return orig(self, idx, value)

    return __setitem__


def _to_hook(orig: Callable, torch: Any) -> Callable:
    """``t.to("cpu")`` of a CUDA tensor is a blocking device-to-host copy. On CPU tensors only the literal
    string ``"cpu"`` counts (would-sync): ``x.to(self.device)`` on a CPU-only run is not the user's sync."""
    sinks, state = hub.sinks, tls
    dtype_t = torch.dtype
    device_t = torch.device

    @wraps(orig)
    def to(self, *args, **kwargs):
        if sinks and not state.depth and (args or kwargs) and not hub.is_compiling():
            dev = kwargs.get("device", args[0] if args else None)
            if isinstance(dev, str) and dev.startswith("cpu"):
                literal = self.is_cuda or _says_cpu(direct_caller(sys._getframe(1)))
            elif dev is not None and not isinstance(dev, dtype_t) and getattr(dev, "type", None) == "cpu":
                literal = False
            elif (self.is_cuda is False and isinstance(dev, (str, int, device_t)) and not isinstance(dev, bool)
                  and (isinstance(dev, int) or str(dev).startswith("cuda"))
                  and not kwargs.get("non_blocking", len(args) > 2 and args[2])):
                caller = direct_caller(sys._getframe(1))  # host -> device: copy, then a stream sync
                return sync_call(orig, '.to("cuda")', caller, (self, *args), kwargs)
            else:
                return orig(self, *args, **kwargs)
            caller = direct_caller(sys._getframe(1))
            cuda = self.is_cuda
            if cuda or (hub.count_cpu and literal and reportable(caller.f_code.co_filename)):
                out = sync_call(orig, '.to("cpu")', caller, (self, *args), kwargs, would=not cuda)
                if not cuda:
                    _remember_chain(state, caller, out)
                return out
        return orig(self, *args, **kwargs)

    return to


_cpu_lines: dict[tuple[str, int], bool] = {}


def _says_cpu(caller: Any) -> bool:
    """Whether the calling line names the host itself (``.to("cpu")``), rather than passing a device
    variable that happens to be "cpu" on this machine (``x.to(self.device)``: a no-op on a GPU run)."""
    key = (caller.f_code.co_filename, caller.f_lineno)
    v = _cpu_lines.get(key)
    if v is None:
        text = source_line(*key)
        v = _cpu_lines[key] = '"cpu' in text or "'cpu" in text
    return v


def _copy_hook(orig: Callable) -> Callable:
    """``copy_`` between host and device without ``non_blocking=True``: torch copies and then synchronizes
    the stream (``memcpy_and_sync``), both directions. (Between two CPU tensors nothing is counted: a
    CPU-only run cannot tell which of them would live on the GPU.)"""
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def copy_(self, src, *args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling():
            dst_cuda = self.is_cuda
            if dst_cuda != getattr(src, "is_cuda", dst_cuda) and not (args[0] if args else kwargs.get("non_blocking", False)):
                op = "cuda_t.copy_(cpu_t)" if dst_cuda else "cpu_t.copy_(cuda_t)"
                caller = direct_caller(sys._getframe(1))
                return sync_call(orig, op, caller, (self, src, *args), kwargs)
        return orig(self, src, *args, **kwargs)

    return copy_


def _cuda_hook(orig: Callable) -> Callable:
    """``cpu_tensor.cuda()`` without ``non_blocking=True``: a host-to-device copy and a stream sync."""
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def cuda(self, *args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling() and not self.is_cuda and not kwargs.get("non_blocking", len(args) > 1 and args[1]):
            caller = direct_caller(sys._getframe(1))
            return sync_call(orig, ".cuda()", caller, (self, *args), kwargs)
        return orig(self, *args, **kwargs)

    return cuda


def _is_cuda_device(device: Any) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True
    return str(device).startswith("cuda")


def _tensor_hook(orig: Callable, Tensor: type) -> Callable:
    """``torch.tensor(data, device=cuda)``: a blocking host-to-device copy of Python data."""
    sinks, state = hub.sinks, tls

    @wraps(orig)
    def tensor(*args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling():
            device = kwargs.get("device")
            data = args[0] if args else kwargs.get("data")
            if device is not None and not isinstance(data, Tensor):
                caller = direct_caller(sys._getframe(1))
                cuda = _is_cuda_device(device)
                if cuda or (hub.count_cpu and reportable(caller.f_code.co_filename)):
                    return sync_call(orig, "torch.tensor(list, device=cuda)", caller, args, kwargs, would=not cuda)
        return orig(*args, **kwargs)

    return tensor


def _one_arg(args: tuple, kwargs: dict) -> bool:
    return len(args) + len(kwargs) == 1


def _where_hook(orig: Callable) -> Callable:
    """``torch.where``: only the one-argument form syncs; the three-argument form (hot in envs) passes
    straight through after one length check."""
    counted = sync_hook(orig, "torch.where(cond)")

    @wraps(orig)
    def where(*args, **kwargs):
        if len(args) + len(kwargs) != 1:
            return orig(*args, **kwargs)
        return counted(*args, **kwargs)

    hub.transparent.add(where.__code__)  # the counted hook looks through this frame for the caller
    return where


def _repeats_unsized(method: bool) -> Callable[[tuple, dict], bool]:
    def when(args: tuple, kwargs: dict) -> bool:
        if kwargs.get("output_size") is not None:
            return False
        import torch

        if method or len(args) + ("repeats" in kwargs) >= 2:
            repeats = kwargs.get("repeats", args[1] if len(args) > 1 else None)
        else:  # torch.repeat_interleave(repeats): the one-argument form reads repeats back
            repeats = args[0] if args else kwargs.get("input")
        return isinstance(repeats, torch.Tensor)

    return when



# ---- the table: every torch attribute this family replaces -------------------------------------------
# factories: (original, patch, the torch module) -> hook


def _method(orig, p: Patch, torch) -> Callable:
    return sync_hook(orig, p.op, p.when, p.chain)


def _api(orig, p: Patch, torch) -> Callable:
    return api_sync_hook(orig, p.op)


_BOOL = lambda torch: (torch.bool, torch.uint8)  # noqa: E731 - mask dtypes: boolean-mask indexing

_KEEP = "keep the value on the GPU (accumulate into a tensor) and read it back every N steps"
_D2H = "keep data on the GPU, or copy into a pinned buffer with non_blocking=True and read it later"
_READBACK = "keep data on the GPU; read back only for logging, every N steps"
_H2D = "create data on the device once; or move pinned memory with non_blocking=True"

PATCHES: tuple[Patch, ...] = (
    # Tensor methods that read a device value on the host
    Patch("Tensor", "item", ".item()", _KEEP, _method),
    Patch("Tensor", "cpu", ".cpu()", _D2H, _method, chain=True),
    Patch("Tensor", "numpy", ".numpy()", _READBACK, _method),
    Patch("Tensor", "tolist", ".tolist()", _READBACK, _method),
    Patch("Tensor", "__bool__", "bool(t)", "branch on the device with torch.where / masked ops instead of a Python `if` on a tensor", _method),
    Patch("Tensor", "__float__", "float(t)", "keep the value as a 0-d tensor; convert only when logging, every N steps", _method),
    Patch("Tensor", "__int__", "int(t)", "keep the value as a tensor; avoid data-dependent Python ints in the step", _method),
    Patch("Tensor", "__index__", "index(t)", "use a Python int (e.g. a shape) rather than a tensor as an index or range bound", _method),
    Patch("Tensor", "__format__", "format(t)", "format tensors only when logging, every N steps", _method),
    Patch("Tensor", "__repr__", "repr(t)", "convert tensors to text only when logging, every N steps", _method,
          also={"print(t)": "print only every N steps, or accumulate on the GPU and print the summary"}),
    Patch("Tensor", "__contains__", "x in t", "compare on the device ((t == x).any()) and keep the result as a tensor", _method),
    Patch("Tensor", "__array__", "np.asarray(t)", "keep data on the GPU; read back only for logging", _method),
    # data-dependent output shapes: the size is read back
    Patch("Tensor", "nonzero", ".nonzero()", "use masked_fill_ / torch.where with the boolean mask instead of indexing by nonzero()", _method),
    Patch("Tensor", "argwhere", ".argwhere()", "use masked_fill_ / torch.where with the boolean mask instead of argwhere()", _method),
    Patch("Tensor", "masked_select", ".masked_select()", "use torch.where(mask, x, 0) and reduce; masked_select has a data-dependent shape", _method),
    Patch("Tensor", "unique", ".unique()", "avoid unique() in the step (data-dependent shape); use scatter/bincount with a fixed size", _method),
    Patch("Tensor", "unique_consecutive", ".unique_consecutive()", "avoid unique_consecutive() in the step (data-dependent shape)", _method),
    Patch("Tensor", "repeat_interleave", ".repeat_interleave()", "pass output_size= to repeat_interleave so it need not read the repeats back",
          _method, when=_repeats_unsized(True)),
    Patch("Tensor", "equal", "torch.equal", "compare on the device and keep the result as a tensor", _method),
    Patch("Tensor", "allclose", "torch.allclose", "compare on the device (torch.isclose(...).all()) and keep the result as a tensor", _method),
    # indexing, conversion and copies
    Patch("Tensor", "__getitem__", "t[bool_mask]", "use torch.where / masked_fill_ with the mask instead of a boolean-mask read (data-dependent shape)",
          lambda orig, p, torch: _getitem_hook(orig, torch.Tensor, _BOOL(torch)),
          also={"t[list]": "index with a preallocated index tensor on the device, not a Python list (a blocking host-to-device copy)"}),
    Patch("Tensor", "__setitem__", "t[bool_mask] = v", "use torch.where(mask, v, t, out=t) or masked_scatter_ / masked_fill_ instead of a boolean-mask write",
          lambda orig, p, torch: _setitem_hook(orig, torch.Tensor, _BOOL(torch)),
          also={"t[list] = v": "write through a preallocated index tensor on the device (index_copy_), not a Python list",
                "t[idx] = scalar": "write a device value: x.index_fill_(0, idx, v), or x[idx] = a preallocated device tensor; "
                                   "a Python scalar through an index is copied host-to-device and synced",
                "t[i] = scalar": "write into a slice (x[i:i + 1] = v is a fill) or keep the value on the device; "
                                 "a Python scalar into one element is copied host-to-device and synced"}),
    Patch("Tensor", "to", '.to("cpu")', "keep data on the GPU, or copy into a pinned buffer with non_blocking=True and read it later",
          lambda orig, p, torch: _to_hook(orig, torch), also={'.to("cuda")': _H2D}),
    Patch("Tensor", "copy_", "cpu_t.copy_(cuda_t)", "copy into a pinned host buffer with non_blocking=True and read it a step later",
          lambda orig, p, torch: _copy_hook(orig),
          also={"cuda_t.copy_(cpu_t)": "keep the data on the device; or copy from a pinned buffer with non_blocking=True"}),
    Patch("Tensor", "cuda", ".cuda()", _H2D, lambda orig, p, torch: _cuda_hook(orig)),
    # torch functions
    Patch("", "nonzero", ".nonzero()", "use masked_fill_ / torch.where with the boolean mask instead of indexing by nonzero()", _method),
    Patch("", "argwhere", ".argwhere()", "use masked_fill_ / torch.where with the boolean mask instead of argwhere()", _method),
    Patch("", "masked_select", ".masked_select()", "use torch.where(mask, x, 0) and reduce; masked_select has a data-dependent shape", _method),
    Patch("", "unique", ".unique()", "avoid unique() in the step (data-dependent shape); use scatter/bincount with a fixed size", _method),
    Patch("", "unique_consecutive", ".unique_consecutive()", "avoid unique_consecutive() in the step (data-dependent shape)", _method),
    Patch("", "repeat_interleave", ".repeat_interleave()", "pass output_size= to repeat_interleave so it need not read the repeats back",
          _method, when=_repeats_unsized(False)),
    Patch("", "equal", "torch.equal", "compare on the device and keep the result as a tensor", _method),
    Patch("", "allclose", "torch.allclose", "compare on the device (torch.isclose(...).all()) and keep the result as a tensor", _method),
    Patch("", "where", "torch.where(cond)", "use the three-argument torch.where(cond, a, b) or masked ops; one-argument where is nonzero()",
          lambda orig, p, torch: _where_hook(orig)),
    Patch("", "tensor", "torch.tensor(list, device=cuda)", "build constants once in __init__, or fill a preallocated device buffer",
          lambda orig, p, torch: _tensor_hook(orig, torch.Tensor)),
    # explicit synchronization
    Patch("cuda", "synchronize", "torch.cuda.synchronize()", "remove the explicit synchronize from the step; time with CUDA events instead", _api),
    Patch("cuda.Event", "synchronize", "Event.synchronize()", "poll with event.query() or wait on the device (stream.wait_event) instead", _api),
    Patch("cuda.Stream", "synchronize", "Stream.synchronize()", "order work with stream.wait_stream / events instead of blocking the host", _api),
)

FIXES = _fixes(PATCHES)
"""op -> the fix in words (a finding's ``message``)."""


def install(patcher: Patcher) -> list[str]:
    import torch

    done = _install(patcher, torch, PATCHES)
    _teach_torchscript(patcher, torch)
    return done


def _teach_torchscript(patcher: Patcher, torch: Any) -> None:
    """TorchScript resolves ``torch.where`` in a scripted function by looking the Python object up in
    its table of builtins (``aten::where``); it would meet the hook instead, try to compile it as
    Python and fail. Each hook of a builtin is registered as that same builtin (and a hook of a
    boolean-dispatched function such as ``torch.unique`` as that dispatch), so scripted code compiles
    to the original op. The registrations are removed with the hooks. (Syncs inside compiled
    TorchScript run in C++ and are not seen by these hooks: ``--verify`` counts them on a GPU.)"""
    try:
        from torch import _jit_internal
        from torch.jit import _builtins
    except ImportError:  # pragma: no cover - a torch without TorchScript
        return
    table = _builtins._get_builtin_table()
    dispatched = _jit_internal.boolean_dispatched
    added: list[int] = []
    keys: list[Any] = []
    for p in PATCHES:
        owner = getattr(torch, p.owner.split(".")[0], None) if p.owner else torch
        for part in p.owner.split(".")[1:] if p.owner else ():
            owner = getattr(owner, part, None)
        hook = getattr(owner, p.name, None) if owner is not None else None
        orig = getattr(hook, "__perfkit_wrapped__", None)
        if orig is None:
            continue
        op = table.get(id(orig))
        if op is not None and id(hook) not in table:
            table[id(hook)] = op
            added.append(id(hook))
        elif orig in dispatched and hook not in dispatched:
            dispatched[hook] = dispatched[orig]
            keys.append(hook)

    def forget() -> None:
        for i in added:
            table.pop(i, None)
        for k in keys:
            dispatched.pop(k, None)

    patcher.on_undo(forget)


def originals() -> dict[str, Any]:
    """Every attribute :data:`PATCHES` replaces, as it is now (the restore check compares before/after)."""
    import torch

    return _originals(torch, PATCHES)
