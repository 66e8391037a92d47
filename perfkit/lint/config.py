"""``[tool.perfkit.lint]`` in pyproject.toml: select, ignore, hot, exclude (and ``all``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None

_RULE_PATTERN = re.compile(r"^PK\d{0,3}$")
KEYS = {"select", "ignore", "hot", "exclude", "all"}


class ConfigError(ValueError):
    """A bad configuration file or value (a usage error: exit status 2)."""


@dataclass
class LintConfig:
    select: list = field(default_factory=list)
    ignore: list = field(default_factory=list)
    hot: list = field(default_factory=list)
    exclude: list = field(default_factory=list)
    all: bool = False
    source: str | None = None  # the file it came from


def find_pyproject(start: str | None = None) -> str | None:
    d = os.path.abspath(start or os.getcwd())
    if os.path.isfile(d):
        d = os.path.dirname(d)
    while True:
        cand = os.path.join(d, "pyproject.toml")
        if os.path.isfile(cand):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def normalize_codes(values, what: str) -> list:
    out = []
    for v in values:
        for code in str(v).split(","):
            code = code.strip().upper()
            if not code:
                continue
            if not _RULE_PATTERN.match(code):
                raise ConfigError(f"{what}: {code!r} is not a rule ID or prefix (like PK101 or PK1)")
            out.append(code)
    return out


def load(path: str | None = None, *, required: bool = False) -> LintConfig:
    """Read ``[tool.perfkit.lint]`` from ``path`` (or the nearest pyproject.toml upwards from the cwd)."""
    if path is None:
        path = find_pyproject()
        if path is None:
            return LintConfig()
    if not os.path.isfile(path):
        if required:
            raise ConfigError(f"config file {path!r} does not exist")
        return LintConfig()
    if tomllib is None:  # pragma: no cover - 3.10 without tomli
        raise ConfigError(f"reading {path} needs Python 3.11+ or `pip install tomli`")
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: {e}") from None
    section = data.get("tool", {}).get("perfkit", {}).get("lint", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.perfkit.lint] must be a table")
    unknown = set(section) - KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.perfkit.lint]: {', '.join(sorted(unknown))} "
                          f"(known: {', '.join(sorted(KEYS))})")
    cfg = LintConfig(source=path)
    for key in ("select", "ignore", "hot", "exclude"):
        val = section.get(key, [])
        if isinstance(val, str):
            val = [val]
        if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
            raise ConfigError(f"{path}: [tool.perfkit.lint] {key} must be a list of strings")
        if key in ("select", "ignore"):
            val = normalize_codes(val, f"{path}: {key}")
        setattr(cfg, key, val)
    all_ = section.get("all", False)
    if not isinstance(all_, bool):
        raise ConfigError(f"{path}: [tool.perfkit.lint] all must be true or false")
    cfg.all = all_
    return cfg
