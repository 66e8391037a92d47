"""The machine cost profile: the probes' numbers for one machine, as the prices the cost model uses.

A profile (JSON schema ``perfkit.machine-profile/1``) holds the raw probe results (``probes``) and a
flat table of primitive costs in milliseconds (``costs``), each with the probe metric it came from
(``cost_sources``). Profiles are cached per machine, driver and torch version
(:func:`perfkit.machine.key`) under ``~/.cache/perfkit/profiles/`` (``$PERFKIT_CACHE_DIR`` or
``$XDG_CACHE_HOME/perfkit`` override the root), so ``perfkit probe`` measures once and every later
report prices with the same numbers.

When no profile for this machine exists, a *reference* profile prices the run: the H200 profile
shipped at ``perfkit/data/h200-profile.json`` (measured by ``perfkit probe`` on the H200, see
``reports/probes-h200/``). The profile says where it came from (``source``), and the cost model
copies that into ``run.pricing.prices``.

**Validation.** ``perfkit/data/price-validation.json`` (schema ``perfkit.price-validation/1``, written
by ``scripts/gpu/price_validate.py`` on the H200 and committed from its output) says, per pricing
model (``loop``, ``alloc``, ``sync_wait``, ``backlog_split``, ``round_trip``: see
:mod:`perfkit.pricing.cost`), whether the model's predicted saving of removing a planted anti-pattern
of ``examples/train_naive.py`` came within the tolerance (±30 %) of the measured saving, and its
worst error. :func:`read_validation` reads it; the cost model copies each finding's model's status
into ``run.pricing.prices`` and the renderers show it ("unvalidated (error +85%)"). Without the
file every model reads "not validated".
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable

SCHEMA = "perfkit.machine-profile/1"

REFERENCE_PATH = Path(__file__).parent.parent / "data" / "h200-profile.json"
VALIDATION_SCHEMA = "perfkit.price-validation/1"
VALIDATION_PATH = Path(__file__).parent.parent / "data" / "price-validation.json"
VALIDATION_STATUSES = ("validated", "unvalidated")

# cost name -> (probe, metric in the probe's dict, unit conversion to the cost's unit, what it prices)
COSTS: dict[str, tuple[str, str, float, str]] = {
    "sync_idle_ms": ("sync", "item_idle_us", 1e-3, "one sync with an idle queue"),
    "sync_queued_extra_ms": ("sync", "item_behind_queue_extra_us", 1e-3,
                             "what one sync adds on top of the queued work it drains"),
    "tensor_repr_ms": ("sync", "tensor_repr_us", 1e-3, "str(t) of a small tensor (print's host half)"),
    "launch_torch_ms": ("launch", "torch_op_us", 1e-3, "issuing one small torch op"),
    "launch_warp_ms": ("launch", "warp_launch_us", 1e-3, "one wp.launch"),
    "graph_kernel_ms": ("launch", "graph_replay_us_per_kernel", 1e-3, "one kernel replayed from a CUDA graph"),
    "alloc_cached_ms": ("allocator", "cached_alloc_us", 1e-3, "a fresh CUDA tensor served by the caching allocator"),
    "alloc_cpu_ms": ("allocator", "cpu_empty_us", 1e-3, "a fresh small CPU tensor"),
    "cudamalloc_ms": ("allocator", "cudamalloc_us", 1e-3, "a fresh CUDA tensor that needs cudaMalloc"),
    "d2h_latency_ms": ("copies", "d2h_pageable_latency_us", 1e-3, "a tiny device->pageable-host copy"),
    "h2d_latency_ms": ("copies", "h2d_pageable_latency_us", 1e-3, "a tiny pageable-host->device copy"),
    "d2h_pinned_latency_ms": ("copies", "d2h_pinned_latency_us", 1e-3, "a tiny device->pinned-host copy"),
    "h2d_pinned_latency_ms": ("copies", "h2d_pinned_latency_us", 1e-3, "a tiny pinned-host->device copy"),
    "d2h_gbps": ("copies", "d2h_pageable_gbps", 1.0, "device->pageable-host bandwidth (GB/s)"),
    "h2d_gbps": ("copies", "h2d_pageable_gbps", 1.0, "pageable-host->device bandwidth (GB/s)"),
    "d2h_pinned_gbps": ("copies", "d2h_pinned_gbps", 1.0, "device->pinned-host bandwidth (GB/s)"),
    "h2d_pinned_gbps": ("copies", "h2d_pinned_gbps", 1.0, "pinned-host->device bandwidth (GB/s)"),
    "nvtx_range_ms": ("markers", "nvtx_range_us", 1e-3, "one NVTX push/pop"),
    "event_record_ms": ("markers", "event_record_us", 1e-3, "recording one CUDA event"),
    "to_torch_ms": ("interop", "to_torch_us", 1e-3, "wp.to_torch of an array"),
    "from_torch_ms": ("interop", "from_torch_us", 1e-3, "wp.from_torch of a tensor"),
    "pyloop_iteration_ms": ("pyloop", "per_env_iteration_us", 1e-3,
                            "one iteration of a per-env Python loop of 3 small torch ops"),
    "pyloop_op_ms": ("pyloop", "per_op_us", 1e-3, "one torch op issued from a per-env Python loop"),
}


class ProfileError(ValueError):
    """A machine profile could not be read or is not a ``perfkit.machine-profile/1`` document."""


# ---- building ---------------------------------------------------------------------------------------
def costs_from_probes(probes: dict[str, dict[str, Any]]) -> tuple[dict[str, float], dict[str, str]]:
    """Flatten probe results into ``(costs, cost_sources)``; metrics a probe could not measure are left out."""
    costs, sources = {}, {}
    for name, (probe, metric, scale, _) in COSTS.items():
        value = (probes.get(probe) or {}).get(metric)
        if isinstance(value, (int, float)) and value == value:  # not NaN
            costs[name] = float(value) * scale
            sources[name] = f"{probe}.{metric}"
    return costs, sources


def build_profile(probes: dict[str, dict[str, Any]], source: str | None = None) -> dict[str, Any]:
    """A profile document from probe results, for this machine."""
    from perfkit import __version__
    from perfkit.machine import describe, key, label
    from perfkit.probes._bench import rounded

    probes = rounded(probes)
    costs, sources = costs_from_probes(probes)
    return {
        "schema": SCHEMA,
        "key": key(),
        "machine": describe(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "perfkit": __version__,
        "source": source or f"measured on this machine ({label()}) by perfkit probe",
        "quick": any(p.get("quick") for p in probes.values()),
        "probes": probes,
        "costs": costs,
        "cost_sources": sources,
    }


def measure_profile(quick: bool = False, only: Iterable[str] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the probes (all, or ``only``) and build this machine's profile."""
    import perfkit.probes as _probes

    return build_profile(_probes.run_all(quick=quick, only=only, progress=progress))


# ---- files --------------------------------------------------------------------------------------------
def validate(doc: Any, source: str = "<profile>") -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ProfileError(f"{source}: not a machine profile (top level is {type(doc).__name__}, not an object)")
    if doc.get("schema") != SCHEMA:
        raise ProfileError(f"{source}: schema {doc.get('schema')!r} is not {SCHEMA!r}")
    costs = doc.get("costs")
    if not isinstance(costs, dict) or not all(isinstance(v, (int, float)) for v in costs.values()):
        raise ProfileError(f"{source}: 'costs' must be an object of numbers")
    if not isinstance(doc.get("probes", {}), dict):
        raise ProfileError(f"{source}: 'probes' must be an object")
    return doc


def read_profile(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such machine profile") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as e:
        raise ProfileError(f"{path}: cannot read as a machine profile: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    return validate(doc, str(path))


def save_profile(profile: dict[str, Any], path: str | os.PathLike | None = None) -> Path:
    """Write ``profile`` to ``path`` (default: this machine's cache file) atomically; returns the path."""
    validate(profile)
    from perfkit.outputs import write_text

    path = Path(path) if path is not None else cache_path(profile.get("key"))
    write_text(path, json.dumps(profile, indent=1, sort_keys=False) + "\n")
    return path


def cache_dir() -> Path:
    root = os.environ.get("PERFKIT_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "perfkit"


def cache_path(machine_key: str | None = None) -> Path:
    if machine_key is None:
        from perfkit.machine import key

        machine_key = key()
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", machine_key).strip("_") or "machine"
    return cache_dir() / "profiles" / f"{safe}.json"


def cached_profile() -> dict[str, Any] | None:
    """This machine's cached profile, or None (a corrupt cache file counts as none)."""
    path = cache_path()
    if not path.exists():
        return None
    try:
        return read_profile(path)
    except ProfileError:
        return None


def reference_profile() -> dict[str, Any]:
    """The H200 profile shipped with perfkit, labelled as a reference (ProfileError if it is missing
    or damaged: a broken installation)."""
    doc = dict(read_profile(REFERENCE_PATH))
    doc["source"] = (f"reference: {doc.get('machine', {}).get('device', 'H200')} profile committed at "
                     f"perfkit/data/{REFERENCE_PATH.name} (measured {doc.get('created', '?')})")
    return doc


def load_profile(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """A profile file, or (``path=None``) this machine's cached profile, else the reference profile."""
    if path is not None:
        return read_profile(path)
    return cached_profile() or reference_profile()


def get_profile(quick: bool = False, only: Iterable[str] | None = None, refresh: bool = False,
                progress: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """This machine's profile with at least the probes asked for, measuring only what the cache lacks.

    A cached probe result is reused unless ``refresh``, or it was a quick one and a full one is asked
    for. Newly measured probes are merged into the cache. Returns ``(profile, measured, reused)``.
    """
    import perfkit.probes as _probes

    names = list(_probes.PROBES) if not only else list(dict.fromkeys(only))
    for name in names:
        _probes.get(name)  # raises UnknownProbe before anything runs
    cached = None if refresh else cached_profile()
    have = dict(cached["probes"]) if cached else {}
    reuse = [n for n in names if n in have and (quick or not have[n].get("quick"))]
    measure = [n for n in names if n not in reuse]
    if not measure and cached is not None:
        return cached, [], reuse
    fresh = _probes.run_all(quick=quick, only=measure, progress=progress)
    have.update(fresh)
    profile = build_profile(have)
    save_profile(profile)
    return profile, measure, reuse


# ---- the committed validation of the pricing models ---------------------------------------------------
def check_validation(doc: Any, source: str = "<validation>") -> dict[str, Any]:
    """``doc`` if it is a ``perfkit.price-validation/1`` document, else ProfileError saying why."""
    if not isinstance(doc, dict) or doc.get("schema") != VALIDATION_SCHEMA:
        raise ProfileError(f"{source}: not a {VALIDATION_SCHEMA} document")
    models = doc.get("models")
    if not isinstance(models, dict):
        raise ProfileError(f"{source}: 'models' must be an object")
    for name, m in models.items():
        if not isinstance(m, dict) or m.get("status") not in VALIDATION_STATUSES:
            raise ProfileError(f"{source}: model {name!r} needs a status, one of {VALIDATION_STATUSES}")
        err = m.get("error")
        if err is not None and not isinstance(err, (int, float)):
            raise ProfileError(f"{source}: model {name!r}: 'error' must be a number or null")
    return doc


def read_validation(path: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The committed validation (``path=None``: ``perfkit/data/price-validation.json``), or None when
    there is none. A damaged file raises ProfileError (a broken installation, like the reference)."""
    path = Path(path) if path is not None else VALIDATION_PATH
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProfileError(f"{path}: cannot read the price validation: {e}") from None
    return check_validation(doc, str(path))


def validation_label(model: str, doc: dict[str, Any] | None) -> str:
    """How far ``model``'s prices are validated, in words: ``validated on NVIDIA H200 (worst error
    -12%)``, ``unvalidated (error +85%)``, ``unvalidated (effect below noise)``, ``not validated``."""
    m = ((doc or {}).get("models") or {}).get(model)
    if not isinstance(m, dict):
        return "not validated"
    err = m.get("error")
    where = ((doc or {}).get("machine") or {}).get("device") or "the GPU"
    if m.get("status") == "validated":
        return f"validated on {where}" + (f" (worst error {err * 100:+.0f}%)" if err is not None else "")
    if err is None:
        return f"unvalidated ({m.get('reason') or 'effect below noise'})"
    return f"unvalidated (error {err * 100:+.0f}%)"
