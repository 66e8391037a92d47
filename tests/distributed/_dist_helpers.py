"""Helpers for the distributed tests: launch torchrun (gloo, CPU) with this checkout first on the path."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
LAUNCH_TIMEOUT_S = 150  # one torchrun launch of a few ranks on a busy 2-core machine


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    e["PYTHONUNBUFFERED"] = "1"
    e["OMP_NUM_THREADS"] = "1"
    e.update(extra)
    return e


def torchrun(nproc: int, args: list[str], cwd: Path, timeout: float = LAUNCH_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node N ARGS`` (a free port per launch), output captured."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *args]
    return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def perfkit(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit", *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
