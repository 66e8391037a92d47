"""Allocation counting: which lines create new tensors, how many per step, and how many bytes.

A ``TorchFunctionMode`` sees every torch call made from Python (factories, out-of-place ops, methods)
and counts each result tensor whose storage is not one of its inputs' (so views, in-place ops,
``out=`` calls and ``.contiguous()`` of a contiguous tensor are not allocations). A mode on every op
costs far too much to leave on, so a :class:`perfkit.profile.session.Session` turns it on for the *sampled*
steps; :func:`perfkit.budget` turns it on for its whole block.

``exact`` (what :func:`perfkit.budget` uses, where the count is the point): on CUDA the caching
allocator's own counters (``allocation.all.allocated`` and ``allocated_bytes.all.allocated``) are
also read around each intercepted call, so a temporary an op allocates inside itself (even an
``out=`` op) is counted at the line that called it. Those reads cost tens of microseconds per op —
measured on the H200, they made a sampled step of ``examples/train.py`` cost as much as dozens of
plain ones — so a session's sampled steps count results only, and read the allocator's counters at the
sampled steps' boundaries: the device allocations per step, which the attributed sites should
account for (``cuda_allocator_allocs_per_step`` in the record).
"""

from __future__ import annotations

import sys
from typing import Any

from perfkit.collectors.sites import user_frame
from perfkit.collectors import hub
from perfkit.collectors.hub import emit, tls

FIX = "preallocate the buffer once (in __init__) and write into it in place (out=, copy_, mul_, ...)"

_op_names: dict[Any, str] = {}


def op_name(func: Any) -> str:
    n = _op_names.get(func)
    if n is None:
        name = getattr(func, "__name__", None) or repr(func)
        qual = getattr(func, "__qualname__", "") or ""
        mod = getattr(func, "__module__", None) or ""
        if qual.startswith(("TensorBase.", "Tensor.")):
            n = f"Tensor.{name}"
        elif mod.startswith(("torch.nn.functional", "torch._C._nn")):
            n = f"F.{name}"
        elif mod.startswith("torch._C._"):  # torch._C._linalg -> torch.linalg, _VariableFunctions -> torch
            sub = mod[len("torch._C._"):]
            n = f"torch.{sub}.{name}" if sub in ("linalg", "fft", "special", "nested", "sparse") else f"torch.{name}"
        elif mod.startswith("torch.") and mod not in ("torch.functional", "torch._C._VariableFunctions"):
            n = f"{mod}.{name}"
        else:
            n = f"torch.{name}"
        _op_names[func] = n
    return n


def _storage_ptr(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # sparse, meta, tensor subclasses without storage
        return -1


def _inputs(args: tuple, kwargs: dict, Tensor: type) -> set[int]:
    ptrs: set[int] = set()
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            ptrs.add(_storage_ptr(a))
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor):
                    ptrs.add(_storage_ptr(b))
    return ptrs


def _make_mode_class():
    import torch
    from torch.overrides import TorchFunctionMode

    Tensor = torch.Tensor

    class AllocMode(TorchFunctionMode):
        """Counts new tensors per user line while active (see module doc)."""

        ops: dict | None = None  # (filename, line) -> torch calls, when a session counts ops per line
        hooked_names: frozenset = frozenset()  # names of the torch functions perfkit's sync hooks wrap
        hooked = 0  # calls of those seen (the session's estimate of its own per-step cost)
        exact = True  # read the CUDA allocator's counters around each call (see module doc)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if hub.is_compiling():  # Dynamo traces modes: let it see only the op
                return func(*args, **kwargs)
            # On CUDA the allocator's own counters see what results cannot: temporaries an op makes
            # inside itself (``torch.linalg.vecdot(a, b, out=c)`` allocates ``a * b``).
            c0 = _cuda_counts() if (self.exact and not tls.depth and hub.sinks and _cuda_ready()) else None
            out = func(*args, **kwargs)
            if tls.depth or not hub.sinks:
                return out
            if self.hooked_names and getattr(func, "__name__", None) in self.hooked_names:
                self.hooked += 1
            if c0 is not None:
                return self._count_cuda(func, args, kwargs, out, c0)
            self._note_op(sys._getframe(1))
            name = getattr(func, "__name__", "")
            if name == "__get__" or "out" in kwargs or (name.endswith("_") and not name.endswith("__")) or name.startswith("__i"):
                return out
            if isinstance(out, Tensor):
                results = (out,)
            elif isinstance(out, (tuple, list)):
                results = tuple(o for o in out if isinstance(o, Tensor))
                if not results:
                    return out
            else:
                return out
            seen = _inputs(args, kwargs, Tensor)
            n = 0
            nbytes = 0
            for r in results:
                p = _storage_ptr(r)
                if p in seen and p not in (0, -1):
                    continue
                if p == -1 and r.layout is not torch.strided:
                    continue
                seen.add(p)
                n += 1
                nbytes += r.numel() * r.element_size()
            self._emit(func, sys._getframe(1), n, nbytes)
            return out

        def _note_op(self, frame):
            """Count one torch call at its user line, when the session counts ops per line."""
            if self.ops is not None:
                f = user_frame(frame)
                if f is not None:
                    k = (f.f_code.co_filename, f.f_lineno)
                    self.ops[k] = self.ops.get(k, 0) + 1

        def _emit(self, func, frame, n: int, nbytes: int) -> None:
            if n > 0:
                tls.depth += 1
                try:
                    emit("alloc", op_name(func), frame, nbytes=nbytes, n=n)
                finally:
                    tls.depth -= 1

        def _count_cuda(self, func, args, kwargs, out, c0):
            """Allocations of one call on a CUDA machine: the allocator's request count over the call
            (results, temporaries), plus new CPU results, which that counter does not see."""
            c1 = _cuda_counts()
            n, nbytes = c1[0] - c0[0], c1[1] - c0[1]
            results = out if isinstance(out, (tuple, list)) else (out,)
            seen = None
            for r in results:
                if isinstance(r, Tensor) and not r.is_cuda and r.layout is torch.strided:
                    seen = _inputs(args, kwargs, Tensor) if seen is None else seen
                    p = _storage_ptr(r)
                    if p not in seen and p not in (0, -1):
                        seen.add(p)
                        n += 1
                        nbytes += r.numel() * r.element_size()
            self._note_op(sys._getframe(2))
            self._emit(func, sys._getframe(2), n, nbytes)
            return out

    return AllocMode


def _cuda_ready() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


def _cuda_counts() -> tuple[int, int]:
    """(allocation requests, bytes requested) of the current device's caching allocator so far."""
    import torch

    # the nested dict straight from C++: ``memory_stats()`` flattens and sorts ~150 keys per call,
    # and this runs twice per torch op while a step is sampled
    s = torch.cuda.memory_stats_as_nested_dict()
    return _nested(s, "allocation"), _nested(s, "allocated_bytes")


def _nested(stats: dict, name: str) -> int:
    return stats.get(name, {}).get("all", {}).get("allocated", 0)


_mode_cls = None


def alloc_mode(ops: dict | None = None, exact: bool = True):
    """A fresh allocation-counting mode (enter it with ``with`` or ``__enter__``/``__exit__``); with
    ``ops``, it also counts every torch call per user line into that dict; ``exact`` reads the CUDA
    allocator around each call (see module doc)."""
    global _mode_cls
    if _mode_cls is None:
        _mode_cls = _make_mode_class()
    m = _mode_cls()
    m.ops = ops
    m.exact = exact
    return m


def cuda_alloc_counter() -> int | None:
    """The CUDA caching allocator's count of allocation requests so far (None without CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    try:
        return int(_nested(torch.cuda.memory_stats_as_nested_dict(), "allocation"))
    except Exception:
        return None
