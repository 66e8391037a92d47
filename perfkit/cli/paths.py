"""The checks every command makes on an output path before it runs anything.

An output never replaces one of the command's inputs (``perfkit profile -o s.py s.py`` would put the
record where the script was; ``export-trace r.json -o r.json`` the trace where the record was), and
it is proven writable — its folder created, a probe file written and removed — before a script,
a sweep or minutes of probing start. Either failure is ``Error: ...``, exit 2, with nothing run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from perfkit.cli.errors import BadInput


def check_output(path: str | os.PathLike, shown: str | None = None, inputs: Iterable = (), what: str = "-o",
                 note: str = "") -> Path:
    """The resolved target of ``path``; BadInput when it is one of ``inputs`` or cannot be written.
    ``shown`` is the path as the user gave it, ``what`` the option that named it, ``note`` text added
    to either message (``" (the script was not run)"``)."""
    from perfkit.outputs import OutputError, check_writable, describe_error, input_at

    shown = os.fspath(path) if shown is None else shown
    clash = input_at(path, inputs)
    if clash is not None:
        raise BadInput(f"{what} {shown} is the input {clash}: writing there would replace it; "
                       f"give another path{note}")
    try:
        return check_writable(path)
    except OutputError as e:
        raise BadInput(f"{describe_error(shown, e)}{note}") from None


def distinct_outputs(named: dict[str, str | os.PathLike | None]) -> None:
    """BadInput when two options name the same file (the second would replace the first)."""
    seen: dict[str, str] = {}
    for opt, path in named.items():
        if path is None:
            continue
        key = os.path.realpath(os.path.expanduser(os.fspath(path)))
        if key in seen:
            raise BadInput(f"{seen[key]} and {opt} name the same file ({os.fspath(path)}): give each its own path")
        seen[key] = opt


def program_inputs(target: str, args, module: bool) -> list:
    """What a profiled program reads that its outputs must not replace: its script (or the module's
    source) and any existing file among its arguments."""
    return [module_file(target) if module else target, *args]


def module_file(name: str) -> str | None:
    """The source file ``python -m name`` would run, found on the path without importing anything
    (importing a package before the profiling session starts would hide its imports from it)."""
    import sys

    parts = name.split(".")
    for entry in [os.getcwd(), *sys.path]:
        base = Path(entry or os.getcwd()).joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__main__.py"):
            if candidate.is_file():
                return str(candidate)
    return None
