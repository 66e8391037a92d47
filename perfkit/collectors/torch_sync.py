"""Sync hooks for torch: every call that needs a device value on the host.

Only the synchronizing entry points are wrapped (they are rare by nature, so the wrappers cost nothing
in a sync-free loop); the single exception is ``Tensor.__getitem__``, whose wrapper is a couple of
type checks before the original runs (boolean-mask reads and Python-list indices are syncs).

Counting rules (what the tests pin down):

* one call is one event: a hook that runs while another hook is already running on the same thread
  counts nothing (``print(t)`` is one ``print(t)``, not ``__repr__`` + ``.item()`` + ``.tolist()``);
* on a CUDA tensor the call is a sync wherever it comes from, attributed to the first user frame;
* a call counts only when it makes the CUDA runtime wait, decided from the call the way the runtime
  does: devices of source and destination, element count (``torch.tensor([], device=cuda)`` copies
  nothing), ``non_blocking`` and pinned memory (:func:`copy_op`), where the index lives (a list, a numpy
  array or a host index tensor is copied to the device; an index tensor on the device is not);
* on a CPU tensor, when ``hub.count_cpu`` is set (the default on a machine without CUDA), the call is a
  *would-sync-on-GPU* event — decided as if the run's tensors lived on the GPU — but only where the
  program made the call (``hub.counts``): torch's own ``.item()`` on its CPU bookkeeping tensors
  (optimizer step counters, ...) is not the user's sync, while torch.distributions' argument checks are
  the caller's (``sites.on_behalf``);
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

from perfkit.source import source_line
from perfkit.collectors import hub
from perfkit.collectors.hub import api_sync_hook, direct_caller, sync_call, tls
from perfkit.collectors.patches import Patch, Patcher, SyncOp, owner_of, sync_ops, wraps
from perfkit.collectors.patches import install as _install
from perfkit.collectors.patches import originals as _originals

def sync_hook(orig: Callable, op: str, when: Callable[[tuple, dict], bool] | None = None, chain: bool = False) -> Callable:
    """Wrap a method whose first argument is the tensor: count one sync per call (see module doc).

    ``when(args, kwargs)`` says whether this particular call syncs (e.g. ``torch.where`` with one
    argument); ``chain`` marks ops whose result may feed ``.numpy()/.tolist()`` on the same line."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused
    consumes = op in _CHAIN_CONSUMERS

    @wraps(orig)
    def hook(*args, **kwargs):
        if not sinks or state.depth:
            return orig(*args, **kwargs)
        t = args[0] if args else None
        cuda = getattr(t, "is_cuda", False)
        if not cuda and not hub.count_cpu:  # a host tensor on a GPU run: nothing to wait for (no frame read)
            return orig(*args, **kwargs)
        if hub.is_compiling() or (when is not None and not when(args, kwargs)):
            return orig(*args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        if not cuda:
            if not hub.counts(False, caller):
                return orig(*args, **kwargs)
            if consumes and _chained(state, caller, t):
                return orig(*args, **kwargs)  # the .numpy() of `t.cpu().numpy()`: counted at .cpu()
        out = sync_call(orig, _op_name(op, caller), caller, args, kwargs, would=not cuda)
        if chain and not cuda:
            _remember_chain(state, caller, out)
        return out

    return hook


_CHAIN_CONSUMERS = frozenset({".numpy()", ".tolist()", "np.asarray(t)"})  # NUMPY, TOLIST, ASARRAY


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


def _index_part_op(e: Any, cuda: bool, Tensor: type, bool_dtypes: tuple, ndarray: type) -> SyncOp | None:
    """The sync one index part makes when reading from a tensor (``cuda``: it lives on the GPU), None
    where the runtime does not wait: an empty list or array copies nothing; an index tensor on the
    indexed tensor's device needs no copy (on a CPU-only run every tensor is taken to be on the device)."""
    te = type(e)
    if te is list:
        return LIST_READ if e else None
    if te is ndarray:
        return NDARRAY_READ if e.size else None
    if isinstance(e, Tensor):
        if e.dtype in bool_dtypes:
            return MASK_READ
        if cuda and not e.is_cuda and e.dim() > 0 and e.numel():
            return HOST_INDEX_READ
    return None


def _index_op(self: Any, idx: Any, Tensor: type, bool_dtypes: tuple, ndarray: type) -> SyncOp | None:
    """The sync ``self[idx]`` makes (see :func:`_index_part_op`), or None."""
    tls.depth += 1  # the index's queries are perfkit's, not the program's ops
    try:
        cuda = self.is_cuda
        if type(idx) is tuple:
            for e in idx:
                if type(e) not in _PLAIN_INDEX:
                    op = _index_part_op(e, cuda, Tensor, bool_dtypes, ndarray)
                    if op is not None:
                        return op
            return None
        return _index_part_op(idx, cuda, Tensor, bool_dtypes, ndarray)
    finally:
        tls.depth -= 1


def _plain_tuple(idx: tuple) -> bool:
    for e in idx:
        if type(e) not in _PLAIN_INDEX:
            return False
    return True


def _ndarray() -> type:
    np = sys.modules.get("numpy")
    return np.ndarray if np is not None else type(None)


def _getitem_hook(orig: Callable, Tensor: type, bool_dtypes: tuple) -> Callable:
    """Reads through a boolean mask (a data-dependent shape: nonzero), a Python list or a numpy array
    (copied to the device), or a host index tensor into a device tensor (copied too). This hook runs
    for every index in the program, so the indices that never sync (ints, slices and tuples of them)
    leave after a type check."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused
    ndarray = _ndarray()

    @wraps(orig)
    def __getitem__(self, idx):
        tp = type(idx)
        if tp in _PLAIN_INDEX or (tp is tuple and _plain_tuple(idx)) or not sinks or state.depth:
            return orig(self, idx)
        op = _index_op(self, idx, Tensor, bool_dtypes, ndarray)
        if op is not None and not hub.is_compiling():
            caller = direct_caller(sys._getframe(1))
            cuda = self.is_cuda
            if hub.counts(cuda, caller):
                return sync_call(orig, op.label, caller, (self, idx), {}, would=not cuda)
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


def _setitem_op(self: Any, idx: Any, value: Any, Tensor: type, bool_dtypes: tuple, ndarray: type) -> SyncOp | None:
    """The sync ``self[idx] = value`` makes (see module doc), or None. One pass over the index, no
    generator, no ``isinstance`` on the common parts: this runs for every item assignment."""
    tp = type(idx)
    if tp is int:
        return SCALAR_ELEMENT_WRITE if _is_scalar(value, Tensor, self) and _ndim(self) == 1 else None
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
                return LIST_WRITE if e else None
            if te is ndarray:
                return NDARRAY_WRITE if e.size else None
            if isinstance(e, Tensor):
                if e.dtype in bool_dtypes:
                    return None if _is_scalar(value, Tensor, self) else MASK_WRITE  # a scalar: masked_fill_
                index_tensor = True
        if not _is_scalar(value, Tensor, self):
            return None
        if index_tensor:
            return SCALAR_INDEX_WRITE
        if all_int and len(idx) == _ndim(self):
            return SCALAR_ELEMENT_WRITE  # every dim indexed by an int: a 0-d target
        return None
    if tp is list:  # an empty list selects nothing, yet a Python scalar is still copied over (H200: 1 sync),
        # named as the runtime's report names the expression: a write through a list
        return LIST_WRITE if idx or _is_scalar(value, Tensor, self) else None
    if tp is ndarray:
        return NDARRAY_WRITE if idx.size else None
    if isinstance(idx, Tensor):
        if idx.dtype in bool_dtypes:
            return None if _is_scalar(value, Tensor, self) else MASK_WRITE
        return SCALAR_INDEX_WRITE if _is_scalar(value, Tensor, self) else None
    return None


def _ndim(t: Any) -> int:
    """``t.dim()`` without it counting as the program's op while allocations are sampled."""
    tls.depth += 1
    try:
        return t.dim()
    finally:
        tls.depth -= 1


def _setitem_hook(orig: Callable, Tensor: type, bool_dtypes: tuple) -> Callable:
    """``t[bool_mask] = values``: index_put_ reads the mask back (nonzero); ``t[list] = values`` and
    ``t[ndarray] = values`` copy the index to the device; a Python scalar written through an index
    tensor or into a single element is copied host-to-device (see module doc). ``t[bool_mask] = scalar``
    (masked_fill_), writes into slices and rows, and device values through an index tensor are not
    counted. Slices leave at once."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused
    ndarray = _ndarray()

    @wraps(orig)
    def __setitem__(self, idx, value):
        if type(idx) is slice or not sinks or state.depth:
            return orig(self, idx, value)
        op = _setitem_op(self, idx, value, Tensor, bool_dtypes, ndarray)
        if op is not None and not hub.is_compiling():
            caller = direct_caller(sys._getframe(1))
            cuda = self.is_cuda
            if hub.counts(cuda, caller):
                return sync_call(orig, op.label, caller, (self, idx, value), {}, would=not cuda)
        return orig(self, idx, value)

    return __setitem__


# ---- copies between host and device: does the runtime wait? ----------------------------------------
# torch copies host<->device with cudaMemcpyAsync and, unless non_blocking, synchronizes the stream
# (memcpy_and_sync); a copy of zero elements returns before any of it. non_blocking device-to-host into
# pageable memory still waits (the CUDA runtime returns only once the copy is done): only a pinned
# destination lets the host go on; ``.to("cpu", non_blocking=True)`` allocates a pinned destination.
# A non_blocking host-to-device copy stages the source and returns. probes/sync_ops.py measures each case.


def copy_op(dst_cuda: bool, src_cuda: bool, numel: int, non_blocking: bool, host_pinned: bool) -> SyncOp | None:
    """The sync ``dst.copy_(src, non_blocking)`` makes, None where the runtime does not wait (both on
    one side, nothing to copy, or non_blocking with the host side able to go on)."""
    if dst_cuda == src_cuda or not numel:
        return None
    if dst_cuda:
        return None if non_blocking else COPY_H2D
    return None if non_blocking and host_pinned else COPY_D2H


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    """``non_blocking`` of ``.to(...)``/``.cuda(...)``: the keyword, or the first positional bool (it
    comes before ``copy`` in every signature)."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    for a in args:
        if type(a) is bool:
            return a
    return False


def _target_device(args: tuple, kwargs: dict, Tensor: type, dtype_t: type) -> Any:
    """The device ``t.to(...)`` moves to (a str, int, torch.device, or another tensor's device), None
    for a dtype-only conversion."""
    dev = kwargs.get("device")
    if dev is None:
        other = kwargs.get("other")
        if isinstance(other, Tensor):
            return other.device
        for a in args[:1]:
            if isinstance(a, Tensor):
                return a.device
            if not isinstance(a, (dtype_t, bool)):
                dev = a
    return dev


def _to_hook(orig: Callable, torch: Any) -> Callable:
    """``t.to(device)``: a device-to-host copy of a CUDA tensor, or a host-to-device copy of a host
    tensor, unless non_blocking (:func:`copy_op`), empty, or already there. On a CPU-only run (every
    tensor on the host) only the literal string ``"cpu"`` counts (would-sync): ``x.to(self.device)`` is
    a no-op on a GPU run, where the tensor already lives on the device."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused
    Tensor, dtype_t = torch.Tensor, torch.dtype
    # a machine with no CUDA: every tensor lives on the host, so only a device given as a string can be
    # the literal "cpu" that counts; every other .to() (a dtype, a device object, another tensor) leaves
    # at once (the whole check cost a CPU run ~3.5 us a call, a fifth of that now)
    host_only = not torch.cuda.is_available()

    @wraps(orig)
    def to(self, *args, **kwargs):
        if host_only and type(args[0] if args else kwargs.get("device")) is not str:
            return orig(self, *args, **kwargs)
        if not sinks or state.depth or not (args or kwargs) or hub.is_compiling():
            return orig(self, *args, **kwargs)
        state.depth += 1  # perfkit's own queries of the call's tensors
        try:
            dev = _target_device(args, kwargs, Tensor, dtype_t)
            to_cuda = _is_cuda_device(dev)
            cuda = self.is_cuda
            if dev is None or cuda == to_cuda:  # already there; on a CPU-only run, a literal "cpu" may not be
                op = TO_CPU if (not cuda and isinstance(dev, str) and dev.startswith("cpu")) else None
            else:
                op = TO_CUDA if to_cuda else TO_CPU
            if op is not None and (_non_blocking(args, kwargs) or not self.numel()):
                op = None
        finally:
            state.depth -= 1
        if op is None:
            return orig(self, *args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        real = cuda or op is TO_CUDA  # a real copy between host and device
        if not (real or (hub.counts(False, caller) and _says_cpu(caller))):
            return orig(self, *args, **kwargs)
        out = sync_call(orig, op.label, caller, (self, *args), kwargs, would=not real)
        if not real:
            _remember_chain(state, caller, out)
        return out

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
    """``dst.copy_(src)`` between host and device (:func:`copy_op`). (Between two CPU tensors nothing is
    counted: a CPU-only run cannot tell which of them would live on the GPU.)"""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused

    @wraps(orig)
    def copy_(self, src, *args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling():
            state.depth += 1
            try:
                dst_cuda = self.is_cuda
                src_cuda = getattr(src, "is_cuda", dst_cuda)
                op = None
                if dst_cuda != src_cuda:
                    non_blocking = bool(args[0] if args else kwargs.get("non_blocking", False))
                    host = src if dst_cuda else self
                    op = copy_op(dst_cuda, src_cuda, self.numel(), non_blocking, non_blocking and host.is_pinned())
            finally:
                state.depth -= 1
            if op is not None:
                caller = direct_caller(sys._getframe(1))
                return sync_call(orig, op.label, caller, (self, src, *args), kwargs)
        return orig(self, src, *args, **kwargs)

    return copy_


def _cuda_hook(orig: Callable) -> Callable:
    """``cpu_tensor.cuda()`` without ``non_blocking=True``: a host-to-device copy and a stream sync
    (nothing for a tensor already there or an empty one)."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused

    @wraps(orig)
    def cuda(self, *args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling() and not self.is_cuda and not _non_blocking(args[1:], kwargs):
            state.depth += 1
            try:
                n = self.numel()
            finally:
                state.depth -= 1
            if n:
                caller = direct_caller(sys._getframe(1))
                return sync_call(orig, CUDA.label, caller, (self, *args), kwargs)
        return orig(self, *args, **kwargs)

    return cuda


def _is_cuda_device(device: Any) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True
    return str(device).startswith("cuda")


def _has_elements(data: Any) -> bool:
    """Whether ``torch.tensor(data)`` holds any element (``[]``, ``[[], []]`` and empty arrays copy nothing)."""
    while type(data) in (list, tuple):
        if not data:
            return False
        data = data[0]
    size = getattr(data, "size", None)
    return size != 0 if isinstance(size, int) else True


def _tensor_hook(orig: Callable, Tensor: type) -> Callable:
    """``torch.tensor(data, device=cuda)``: a blocking host-to-device copy of Python data (none when the
    data holds no element). On a CPU-only run any ``device=`` counts (would-sync): it names the device
    the data would be copied to on a GPU."""
    sinks, state = hub.sync_sinks, tls  # empty while counting syncs is paused

    @wraps(orig)
    def tensor(*args, **kwargs):
        if sinks and not state.depth and not hub.is_compiling():
            device = kwargs.get("device")
            data = args[0] if args else kwargs.get("data")
            if device is not None and not isinstance(data, Tensor) and _has_elements(data):
                caller = direct_caller(sys._getframe(1))
                cuda = _is_cuda_device(device)
                if hub.counts(cuda, caller):
                    return sync_call(orig, TENSOR.label, caller, args, kwargs, would=not cuda)
        return orig(*args, **kwargs)

    return tensor


def _where_hook(orig: Callable) -> Callable:
    """``torch.where``: only the one-argument form syncs; the three-argument form (hot in envs) passes
    straight through after one length check."""
    counted = sync_hook(orig, WHERE.label)

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
    return sync_hook(orig, p.op.label, p.when, p.chain)


def _api(orig, p: Patch, torch) -> Callable:
    return api_sync_hook(orig, p.op.label)


_BOOL = lambda torch: (torch.bool, torch.uint8)  # noqa: E731 - mask dtypes: boolean-mask indexing

_KEEP = "keep the value on the GPU (accumulate into a tensor) and read it back every N steps"
_D2H = "keep data on the GPU, or copy into a pinned buffer with non_blocking=True and read it later"
_READBACK = "keep data on the GPU; read back only for logging, every N steps"
_H2D = "create data on the device once; or move pinned memory with non_blocking=True"

# ---- the vocabulary: every op this family reports (label, kind, fix, the lint rule that finds it) ----
D2H, H2D, SHAPE, SCALAR, WAIT = "d2h copy", "h2d copy", "data-dependent shape", "scalar read", "device-wide wait"
ITEM = SyncOp(".item()", SCALAR, _KEEP, "PK101")
CPU = SyncOp(".cpu()", D2H, _D2H, "PK102")
NUMPY = SyncOp(".numpy()", D2H, _READBACK, "PK102")
TOLIST = SyncOp(".tolist()", D2H, _READBACK, "PK102")
BOOL = SyncOp("bool(t)", SCALAR, "branch on the device with torch.where / masked ops instead of a Python `if` on a tensor", "PK103")
FLOAT = SyncOp("float(t)", SCALAR, "keep the value as a 0-d tensor; convert only when logging, every N steps", "PK104")
INT = SyncOp("int(t)", SCALAR, "keep the value as a tensor; avoid data-dependent Python ints in the step", "PK104")
INDEX = SyncOp("index(t)", SCALAR, "use a Python int (e.g. a shape) rather than a tensor as an index or range bound", None)
FORMAT = SyncOp("format(t)", D2H, "format tensors only when logging, every N steps", "PK105")
REPR = SyncOp("repr(t)", D2H, "convert tensors to text only when logging, every N steps", "PK105")
PRINT = SyncOp("print(t)", D2H, "print only every N steps, or accumulate on the GPU and print the summary", "PK105")
CONTAINS = SyncOp("x in t", SCALAR, "compare on the device ((t == x).any()) and keep the result as a tensor", None)
ASARRAY = SyncOp("np.asarray(t)", D2H, "keep data on the GPU; read back only for logging", "PK102")
NONZERO = SyncOp(".nonzero()", SHAPE, "use masked_fill_ / torch.where with the boolean mask instead of indexing by nonzero()", "PK106")
ARGWHERE = SyncOp(".argwhere()", SHAPE, "use masked_fill_ / torch.where with the boolean mask instead of argwhere()", "PK106")
MASKED_SELECT = SyncOp(".masked_select()", SHAPE, "use torch.where(mask, x, 0) and reduce; masked_select has a data-dependent shape", "PK106")
UNIQUE = SyncOp(".unique()", SHAPE, "avoid unique() in the step (data-dependent shape); use scatter/bincount with a fixed size", "PK106")
UNIQUE_CONSECUTIVE = SyncOp(".unique_consecutive()", SHAPE, "avoid unique_consecutive() in the step (data-dependent shape)", "PK106")
REPEAT_INTERLEAVE = SyncOp(".repeat_interleave()", SHAPE, "pass output_size= to repeat_interleave so it need not read the repeats back", "PK106")
EQUAL = SyncOp("torch.equal", SCALAR, "compare on the device and keep the result as a tensor", "PK104")
ALLCLOSE = SyncOp("torch.allclose", SCALAR, "compare on the device (torch.isclose(...).all()) and keep the result as a tensor", "PK104")
MASK_READ = SyncOp("t[bool_mask]", SHAPE, "use torch.where / masked_fill_ with the mask instead of a boolean-mask read (data-dependent shape)", "PK107")
LIST_READ = SyncOp("t[list]", H2D, "index with a preallocated index tensor on the device, not a Python list (a blocking host-to-device copy)", "PK108")
NDARRAY_READ = SyncOp("t[ndarray]", H2D, "index with an index tensor on the device (torch.from_numpy(idx).to(device) once, or "
                      "torch.randperm(n, device=device)), not a numpy array (a blocking host-to-device copy)", None)
HOST_INDEX_READ = SyncOp("t[cpu_idx]", H2D, "keep the index tensor on the device the indexed tensor lives on (a host index is copied "
                         "to the device, blocking)", None)
MASK_WRITE = SyncOp("t[bool_mask] = v", SHAPE, "use torch.where(mask, v, t, out=t) or masked_scatter_ / masked_fill_ instead of a "
                    "boolean-mask write", "PK113")
LIST_WRITE = SyncOp("t[list] = v", H2D, "write through a preallocated index tensor on the device (index_copy_), not a Python list", "PK108")
NDARRAY_WRITE = SyncOp("t[ndarray] = v", H2D, "write through an index tensor on the device, not a numpy array", None)
SCALAR_INDEX_WRITE = SyncOp("t[idx] = scalar", H2D, "write a device value: x.index_fill_(0, idx, v), or x[idx] = a preallocated device "
                            "tensor; a Python scalar through an index is copied host-to-device and synced", "PK113")
SCALAR_ELEMENT_WRITE = SyncOp("t[i] = scalar", H2D, "write into a slice (x[i:i + 1] = v is a fill) or keep the value on the device; "
                              "a Python scalar into one element is copied host-to-device and synced", "PK113")
TO_CPU = SyncOp('.to("cpu")', D2H, _D2H, "PK102")
TO_CUDA = SyncOp('.to("cuda")', H2D, _H2D, "PK109")
COPY_D2H = SyncOp("cpu_t.copy_(cuda_t)", D2H, "copy into a pinned host buffer with non_blocking=True and read it a step later", None)
COPY_H2D = SyncOp("cuda_t.copy_(cpu_t)", H2D, "keep the data on the device; or copy from a pinned buffer with non_blocking=True", None)
CUDA = SyncOp(".cuda()", H2D, _H2D, "PK109")
WHERE = SyncOp("torch.where(cond)", SHAPE, "use the three-argument torch.where(cond, a, b) or masked ops; one-argument where is nonzero()", "PK106")
TENSOR = SyncOp("torch.tensor(list, device=cuda)", H2D, "build constants once in __init__, or fill a preallocated device buffer", "PK109")
CUDA_SYNC = SyncOp("torch.cuda.synchronize()", WAIT, "remove the explicit synchronize from the step; time with CUDA events instead", "PK110")
EVENT_SYNC = SyncOp("Event.synchronize()", WAIT, "poll with event.query() or wait on the device (stream.wait_event) instead", "PK110")
STREAM_SYNC = SyncOp("Stream.synchronize()", WAIT, "order work with stream.wait_stream / events instead of blocking the host", "PK110")

_getitem = lambda orig, p, torch: _getitem_hook(orig, torch.Tensor, _BOOL(torch))  # noqa: E731
_setitem = lambda orig, p, torch: _setitem_hook(orig, torch.Tensor, _BOOL(torch))  # noqa: E731

def _method_and_function(name: str, op: SyncOp, when: Callable[[bool], Callable] | None = None) -> tuple[Patch, Patch]:
    """``Tensor.<name>`` and ``torch.<name>``: one op, two rows (``when(method)`` narrows each; a row
    with a ``when`` decides from the call, so it is not an always row)."""
    return tuple(Patch("Tensor" if method else "", name, op, _method, always=when is None,
                       when=when(method) if when is not None else None) for method in (True, False))


# always=True: every call the hook counts on a CUDA tensor makes the runtime wait; False: the hook
# decides from the call (devices, sizes, pinned memory, the index's kind) — see patches.Patch.
PATCHES: tuple[Patch, ...] = (
    # Tensor methods that read a device value on the host
    Patch("Tensor", "item", ITEM, _method, always=True),
    Patch("Tensor", "cpu", CPU, _method, always=True, chain=True),
    Patch("Tensor", "numpy", NUMPY, _method, always=True),
    Patch("Tensor", "tolist", TOLIST, _method, always=True),
    Patch("Tensor", "__bool__", BOOL, _method, always=True),
    Patch("Tensor", "__float__", FLOAT, _method, always=True),
    Patch("Tensor", "__int__", INT, _method, always=True),
    Patch("Tensor", "__index__", INDEX, _method, always=True),
    Patch("Tensor", "__format__", FORMAT, _method, always=True),
    Patch("Tensor", "__repr__", REPR, _method, always=True, also=(PRINT,)),
    Patch("Tensor", "__contains__", CONTAINS, _method, always=True),
    Patch("Tensor", "__array__", ASARRAY, _method, always=True),
    # data-dependent output shapes (the size is read back) and comparisons: each a Tensor method and a torch function
    *_method_and_function("nonzero", NONZERO),
    *_method_and_function("argwhere", ARGWHERE),
    *_method_and_function("masked_select", MASKED_SELECT),
    *_method_and_function("unique", UNIQUE),
    *_method_and_function("unique_consecutive", UNIQUE_CONSECUTIVE),
    *_method_and_function("repeat_interleave", REPEAT_INTERLEAVE, when=_repeats_unsized),
    *_method_and_function("equal", EQUAL),
    *_method_and_function("allclose", ALLCLOSE),
    # indexing, conversion and copies
    Patch("Tensor", "__getitem__", MASK_READ, _getitem, always=False, also=(LIST_READ, NDARRAY_READ, HOST_INDEX_READ)),
    Patch("Tensor", "__setitem__", MASK_WRITE, _setitem, always=False,
          also=(LIST_WRITE, NDARRAY_WRITE, SCALAR_INDEX_WRITE, SCALAR_ELEMENT_WRITE)),
    Patch("Tensor", "to", TO_CPU, lambda orig, p, torch: _to_hook(orig, torch), always=False, also=(TO_CUDA,)),
    Patch("Tensor", "copy_", COPY_D2H, lambda orig, p, torch: _copy_hook(orig), always=False, also=(COPY_H2D,)),
    Patch("Tensor", "cuda", CUDA, lambda orig, p, torch: _cuda_hook(orig), always=False),
    # torch functions
    Patch("", "where", WHERE, lambda orig, p, torch: _where_hook(orig), always=False),
    Patch("", "tensor", TENSOR, lambda orig, p, torch: _tensor_hook(orig, torch.Tensor), always=False),
    # explicit synchronization
    Patch("cuda", "synchronize", CUDA_SYNC, _api, always=True),
    Patch("cuda.Event", "synchronize", EVENT_SYNC, _api, always=True),
    Patch("cuda.Stream", "synchronize", STREAM_SYNC, _api, always=True),
)

SYNC_OPS = sync_ops(PATCHES)
"""label -> :class:`SyncOp`: every op this family reports."""


def install(patcher: Patcher, always_only: bool = False) -> list[str]:
    """Hook torch (only the :attr:`Patch.always` rows with ``always_only``: on CUDA, where the runtime
    itself reports the syncs of the others)."""
    import torch

    done = _install(patcher, torch, PATCHES, always_only)
    _teach_torchscript(patcher, torch)
    _teach_dynamo(torch)
    return done


def _installed_hooks(torch: Any) -> list[tuple[Any, Any]]:
    """``(hook, original)`` of every :data:`PATCHES` row installed on ``torch`` now."""
    out = []
    for p in PATCHES:
        owner = owner_of(torch, p.owner)
        hook = getattr(owner, p.name, None) if owner is not None else None
        orig = getattr(hook, "__perfkit_wrapped__", None)
        if orig is not None:
            out.append((hook, orig))
    return out


def _teach_dynamo(torch: Any) -> None:
    """Dynamo reads ``torch.where``, ``torch.tensor``, ... once per process into its table of in-graph
    functions (``trace_rules.get_torch_obj_rule_map``, cached). Read while the hooks stood there, the
    table would hold the hooks — gone with the session — instead of the ops, and every later compile of
    such a call would fail ("marked as skipped"): a second session's, or the program's own after perfkit.
    ``_torchdynamo_inline`` is Dynamo's own mark of a wrapper that stands for another function: the
    table then holds the op, and Dynamo traces a call of the hook as the op (no perfkit code in a graph,
    as ``hub.is_compiling`` has it). The hooks are new objects each session: nothing to undo."""
    for hook, orig in _installed_hooks(torch):
        try:
            hook._torchdynamo_inline = orig
        except (AttributeError, TypeError):  # pragma: no cover - a hook that takes no attributes
            pass


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
    for hook, orig in _installed_hooks(torch):
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


def originals(always_only: bool = False) -> dict[str, Any]:
    """Every attribute :data:`PATCHES` replaces, as it is now (the restore check compares before/after)."""
    import torch

    return _originals(torch, PATCHES, always_only)
