"""``[tool.perfkit]`` settings, read from the nearest ``pyproject.toml`` (the working directory, then
its parents). Command-line options override them; they override the defaults below.

    [tool.perfkit]
    step_fn = "mypkg.env:MyEnv.step"      # what one env step is (default: auto-detected)
    warmup_steps = 5                     # steps kept apart from steady state
    segments = {"mypkg.env:MyEnv.compute_obs" = "policy", "apply_actuators" = "physics"}
    max_syncs_per_step = 0               # budgets for `perfkit profile`
    max_allocs_per_step = 0
    timing_every = 7                     # CUDA-event timing on every k-th steady step (prime: no aliasing with rollouts)
    sample_every = 31                    # sample allocations / loops / stream hazards on every k-th steady step
    sample_budget = 0.01                 # ... and widen k so that sampling costs at most this share of the run (1: never)
    sample_steps = [6, 7]                # or exactly these steps (overrides sample_every)
    nvtx = "auto"                        # "auto" (every step under nsys, else timed steps), "always", "off"
    step_methods = ["step"]              # method names that are an env step (on an object with `num_envs`)
    user_code_only = false               # true: report findings at your own lines only, not inside libraries
    runtime = ["my_tensor_lib"]          # more packages treated like torch (findings never sit inside them)
    sync_source = "auto"                 # "auto": on CUDA the runtime reports each sync (torch's sync-debug
                                         # mode); "hooks": Python hooks decide from each call, as on a CPU
    sync_counting = "auto"               # "periods": once a few whole periods of the loop agree, count syncs
                                         # on one period in every few; "every-step"; "auto": periods on CUDA
                                         # where the runtime reports the syncs (never under --verify)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


SYNC_COUNTING = ("auto", "periods", "every-step")


class ConfigError(ValueError):
    """``[tool.perfkit]`` holds a value perfkit cannot use; the message names the file and key."""


@dataclass
class Config:
    step_fn: str | None = None
    warmup_steps: int = 5
    segments: dict[str, str] = field(default_factory=dict)
    max_syncs_per_step: float | None = None
    max_allocs_per_step: float | None = None
    timing_every: int = 7
    sample_every: int = 31
    sample_budget: float = 0.01
    sample_steps: tuple[int, ...] | None = None  # explicit sampled steps; None: every sample_every-th steady step
    nvtx: str = "auto"
    step_methods: tuple[str, ...] = ("step",)
    user_code_only: bool = False
    runtime: tuple[str, ...] = ()
    sync_source: str = "auto"  # "auto" | "hooks" (perfkit.collectors.hub.sync_source)
    sync_counting: str = "auto"  # "auto" | "periods" | "every-step" (perfkit.collectors.sync_gate)
    timeline_steps: int = 8
    verify_steps: int = 64
    source: str | None = None  # the pyproject.toml it came from

    @property
    def segment_targets(self) -> dict[str, str]:
        """``"module:attr" = segment`` entries (wrapped at session start)."""
        return {k: v for k, v in self.segments.items() if ":" in k}

    @property
    def segment_names(self) -> dict[str, str]:
        """``"function_name" = segment`` entries (matched by name in user code)."""
        return {k: v for k, v in self.segments.items() if ":" not in k}


def find_pyproject(start: str | os.PathLike | None = None) -> Path | None:
    d = Path(start or os.getcwd()).resolve()
    for p in (d, *d.parents):
        f = p / "pyproject.toml"
        if f.is_file():
            return f
    return None


def _int(v: Any, key: str, src: str, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"{src}: [tool.perfkit] {key} must be an integer >= {minimum}, got {v!r}")
    return v


def from_dict(d: dict[str, Any], source: str = "<config>") -> Config:
    cfg = Config(source=source)
    known = {f.name for f in dataclasses.fields(Config)} - {"source"}
    unknown = set(d) - known
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.perfkit] key(s): {', '.join(sorted(unknown))}")
    if "step_fn" in d:
        if not isinstance(d["step_fn"], str) or ":" not in d["step_fn"]:
            raise ConfigError(f"{source}: [tool.perfkit] step_fn must be 'module:Class.method', got {d['step_fn']!r}")
        cfg.step_fn = d["step_fn"]
    for key, minimum in (("warmup_steps", 0), ("timing_every", 1), ("timeline_steps", 0), ("verify_steps", 1), ("sample_every", 1)):
        if key in d:
            setattr(cfg, key, _int(d[key], key, source, minimum))
    if "segments" in d:
        segs = d["segments"]
        if not isinstance(segs, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in segs.items()):
            raise ConfigError(f"{source}: [tool.perfkit] segments must map names or 'module:attr' to segment names")
        cfg.segments = dict(segs)
    for key in ("max_syncs_per_step", "max_allocs_per_step"):
        if key in d:
            v = d[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{source}: [tool.perfkit] {key} must be a number >= 0, got {v!r}")
            setattr(cfg, key, float(v))
    if "sample_steps" in d:
        v = d["sample_steps"]
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 1 for i in v):
            raise ConfigError(f"{source}: [tool.perfkit] sample_steps must be a list of step numbers >= 1, got {v!r}")
        cfg.sample_steps = tuple(v)
    if "sample_budget" in d:
        v = d["sample_budget"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise ConfigError(f"{source}: [tool.perfkit] sample_budget must be a fraction in (0, 1], got {v!r}")
        cfg.sample_budget = float(v)
    for key in ("step_methods", "runtime"):
        if key in d:
            v = d[key]
            if not isinstance(v, list) or not all(isinstance(x, str) and x.isidentifier() for x in v) or (key == "step_methods" and not v):
                raise ConfigError(f"{source}: [tool.perfkit] {key} must be a list of names, got {v!r}")
            setattr(cfg, key, tuple(v))
    if "user_code_only" in d:
        if not isinstance(d["user_code_only"], bool):
            raise ConfigError(f"{source}: [tool.perfkit] user_code_only must be true or false, got {d['user_code_only']!r}")
        cfg.user_code_only = d["user_code_only"]
    if "sync_source" in d:
        if d["sync_source"] not in ("auto", "hooks"):
            raise ConfigError(f"{source}: [tool.perfkit] sync_source must be 'auto' or 'hooks', got {d['sync_source']!r}")
        cfg.sync_source = d["sync_source"]
    if "sync_counting" in d:
        if d["sync_counting"] not in SYNC_COUNTING:
            raise ConfigError(f"{source}: [tool.perfkit] sync_counting must be one of {', '.join(map(repr, SYNC_COUNTING))}, "
                              f"got {d['sync_counting']!r}")
        cfg.sync_counting = d["sync_counting"]
    if "nvtx" in d:
        if d["nvtx"] not in ("auto", "always", "off"):
            raise ConfigError(f"{source}: [tool.perfkit] nvtx must be 'auto', 'always' or 'off', got {d['nvtx']!r}")
        cfg.nvtx = d["nvtx"]
    return cfg


def load(start: str | os.PathLike | None = None) -> Config:
    """The config of the nearest pyproject.toml (defaults when there is none or it has no table)."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    table = data.get("tool", {}).get("perfkit", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.perfkit] must be a table")
    # sub-tables belong to other commands (e.g. [tool.perfkit.lint])
    table = {k: v for k, v in table.items() if not (isinstance(v, dict) and k != "segments")}
    return from_dict(table, str(path))
