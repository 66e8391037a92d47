"""What each command needs beyond perfkit's core (``click``: enough for ``perfkit lint``), checked
before the command does anything, with the install line that provides it.

torch is the user's own (its build decides CPU or CUDA), so it is named alone: ``pip install torch``;
the rest come with perfkit's extras (``pyproject.toml``): ``profile`` (profile, sweep, probe) and
``report`` (report, compare).
"""

from __future__ import annotations

import importlib.util

from perfkit.cli.errors import BadInput

# module -> the extra that installs it
EXTRA_OF = {
    "numpy": "profile", "pandas": "profile", "rich": "profile", "tqdm": "profile",
    "matplotlib": "report", "jinja2": "report",
}


def importable(module: str) -> bool:
    """True when ``module`` can be found (without importing it: checking torch must not cost seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(command: str, *modules: str, extra: str | None = None) -> None:
    """BadInput (``Error: perfkit COMMAND needs ...``, exit 2) naming every missing module and how to
    install it; ``extra`` names the perfkit extra for the non-torch ones (default: each module's own)."""
    missing = [m for m in dict.fromkeys(modules) if not importable(m)]
    if not missing:
        return
    parts = []
    if "torch" in missing:
        parts.append("torch (pip install torch)")
    others = [m for m in missing if m != "torch"]
    if others:
        extras = sorted({extra or EXTRA_OF.get(m, "all") for m in others})
        parts.append(f"{', '.join(others)} (pip install 'perfkit[{','.join(extras)}]')")
    raise BadInput(f"perfkit {command} needs {' and '.join(parts)}")
