"""Compiled code perfkit's Python hooks cannot see into.

A function compiled to TorchScript runs its ops in C++: the sync hooks, which wrap Python entry points,
do not fire inside it (perfkit keeps such functions compiling and running as without it, see
:func:`perfkit.collectors.torch_sync.install`). The record says which program functions and modules
were compiled, so a reader knows where a sync could hide; on a GPU ``--verify`` counts the runtime's
own syncs, those too.
"""

from __future__ import annotations

import sys

from perfkit.collectors.sites import is_program_file

MAX_NAMES = 8


def torchscript_names() -> list[str]:
    """``module.qualname`` of the program's functions and ``nn.Module`` classes compiled to TorchScript
    in this process (torch's own left out)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    names: set[str] = set()
    try:
        from torch.jit import _recursive, _state

        objs = list(_state._jit_caching_layer.keys()) + list(_recursive.concrete_type_store.type_store.keys())
    except Exception:  # a torch without these internals: say nothing rather than guess
        return []
    for obj in objs:
        code = getattr(obj, "__code__", None)
        if code is None:
            fwd = getattr(obj, "forward", None)
            code = getattr(fwd, "__code__", None)
        if code is None or not is_program_file(code.co_filename):
            continue
        names.add(f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}")
    return sorted(names)


def torchscript_note(before: set[str] | frozenset = frozenset()) -> str | None:
    """The record's note; names compiled since ``before`` (the names at the session's start) first."""
    names = torchscript_names()
    if not names:
        return None
    names = sorted(names, key=lambda n: (n in before, n))
    shown = ", ".join(names[:MAX_NAMES]) + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")
    return (f"TorchScript compiled in this process: {shown}. Ops inside TorchScript run in C++, where perfkit's "
            "Python hooks do not see syncs; on a GPU, --verify counts the runtime's syncs there too")
