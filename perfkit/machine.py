"""What machine and software a run was measured on (the record's ``machine`` block)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from functools import lru_cache
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
    """GPU, driver, CUDA and library versions; cheap after the first call. Never initializes CUDA
    on a machine that has none."""
    info: dict[str, Any] = {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "device": "cpu",
        "torch": None,
        "cuda": None,
        "driver": None,
        "warp": _version("warp-lang"),
        "mujoco": _version("mujoco") or _version("mujoco-core"),
        "mujoco_warp": _version("mujoco-warp"),
    }
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return info
    info["torch"] = torch.__version__.split("+")[0]
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info["device"] = props.name
        info["gpu_memory_bytes"] = int(props.total_memory)
        info["cuda"] = torch.version.cuda
        info["driver"] = _driver_version()
    return info


def _driver_version() -> str | None:
    try:
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()
        for tok in first.split():
            if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                return tok
    except OSError:
        pass
    return None


def label(info: dict[str, Any] | None = None) -> str:
    """The machine in words, for titles: ``NVIDIA H200, driver 580.65, CUDA 13.0, torch 2.11.0`` —
    only what is known (a CPU-only machine has no driver or CUDA to name)."""
    d = describe() if info is None else info
    parts = [str(d.get("device") or "unknown device")]
    for name, k in (("driver", "driver"), ("CUDA", "cuda"), ("torch", "torch")):
        if d.get(k):
            parts.append(f"{name} {d[k]}")
    return ", ".join(parts)


def key() -> str:
    """Identifies a machine for caching its cost profile: device, driver and torch version."""
    d = describe()
    return f"{d['device']}|{d.get('driver')}|{d['torch']}".replace(" ", "_")


def process_memory(torch: Any = None) -> dict[str, int]:
    """This process's memory, the record's ``memory`` block: peak and current host RSS and, given
    ``torch`` with CUDA initialized, the caching allocator's peaks (allocated and reserved)."""
    mem: dict[str, int] = {}
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        mem["host_peak_rss_bytes"] = int(peak) * (1 if sys.platform == "darwin" else 1024)
    except Exception:
        pass
    try:
        with open("/proc/self/statm") as f:
            mem["host_rss_bytes"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        try:
            mem["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated())
            mem["peak_gpu_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
        except Exception:
            pass
    return mem
