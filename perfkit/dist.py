"""Distributed runs: which rank a process is, on which device, and where its run record goes.

A data-parallel job launched by ``torchrun`` (or any launcher that sets the same environment:
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``/``NODE_RANK``,
``MASTER_ADDR``/``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``) runs ``perfkit profile`` once per rank.
Each rank profiles itself and writes its own record; :func:`rank_record_path` names it
(``run.json`` -> ``run.rank3.json``). The record's ``dist`` block (:data:`DIST_KEYS`) says which rank
wrote it; ``perfkit report`` merges the ranks (:mod:`perfkit.analysis.ranks`).

A process with none of these variables is rank 0 of a world of 1; so is a sweep point (the sweep
strips the variables from its points' environment: :data:`LAUNCH_VARS`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

# The launcher's variables (torchrun sets all of them; other launchers set a subset).
LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK",
               "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
               "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
               "TORCH_NCCL_ASYNC_ERROR_HANDLING")

DIST_KEYS = ("rank", "local_rank", "world_size", "local_world_size", "node", "host", "backend", "device",
             "visible_devices", "physical_gpu", "launcher", "run_id", "master")
"""The ``dist`` block of a run record, always present (a plain run: rank 0 of 1, backend null):

* ``rank``, ``local_rank``, ``world_size``, ``local_world_size``: from the process group when the
  program created one, else from the launcher's environment, else 0, 0, 1, 1;
* ``node``: the node's rank (``GROUP_RANK``/``NODE_RANK``), else 0; ``host``: the host name;
* ``backend``: the process group's (``gloo``, ``nccl``, ``cpu:gloo,cuda:nccl``), null without one;
* ``device``: where this rank's env stepped (``cuda:1``, ``cpu``), else torch's current CUDA device
  once CUDA was initialized, else ``cpu``; ``visible_devices``: ``CUDA_VISIBLE_DEVICES`` as the
  process saw it (``cuda:0`` under ``CUDA_VISIBLE_DEVICES=1`` is the machine's GPU 1:
  ``physical_gpu``);
* ``launcher``: ``torchrun`` (``TORCHELASTIC_RUN_ID`` set), ``env`` (``WORLD_SIZE`` set by something
  else), or null; ``run_id``: torchrun's rendezvous id; ``master``: ``MASTER_ADDR:MASTER_PORT``.
  Records of one job share ``run_id`` and ``master``: that is how a report groups ranks.

``complete_steps``: the timed steady steps the per-step figures of ``comm`` and ``ddp`` are over (every
timed step but the last, which has no next boundary). ``comm`` (the collectives,
:mod:`perfkit.collectors.comm`) and ``ddp`` (DistributedDataParallel's bucket statistics on steady
iterations) are added where the run made any."""


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        v = env.get(name)
        if v is None or not str(v).strip():
            continue
        try:
            return int(str(v).strip())
        except ValueError:
            continue
    return None


def launch_info(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the launcher's environment says about this process (see :data:`DIST_KEYS`); a process
    without one is rank 0 of a world of 1. Values that do not parse are taken as absent."""
    env = os.environ if environ is None else environ
    world = _int(env, "WORLD_SIZE")
    rank = _int(env, "RANK")
    if world is None or world < 1:
        world = 1
    if rank is None or not 0 <= rank < world:
        rank = 0
    local_rank = _int(env, "LOCAL_RANK")
    local_world = _int(env, "LOCAL_WORLD_SIZE")
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") else ("env" if env.get("WORLD_SIZE") else None)
    return {
        "rank": rank,
        "local_rank": local_rank if local_rank is not None and local_rank >= 0 else (0 if world == 1 else None),
        "world_size": world,
        "local_world_size": local_world if local_world is not None and local_world >= 1 else (1 if world == 1 else None),
        "node": _int(env, "GROUP_RANK", "NODE_RANK") or 0,
        "launcher": launcher,
        "run_id": env.get("TORCHELASTIC_RUN_ID") or None,
        "master": f"{addr}:{port}" if addr and port else None,
        "visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
    }


def physical_gpu(device: str | None, visible: str | None) -> str | None:
    """The machine's GPU behind ``device`` (``cuda:0`` under ``CUDA_VISIBLE_DEVICES=1`` is ``"1"``);
    the index itself when nothing narrows the visible devices; None for the CPU."""
    if not device or not str(device).startswith("cuda"):
        return None
    _, _, idx = str(device).partition(":")
    i = int(idx) if idx.isdigit() else 0
    if visible is None or not visible.strip():
        return str(i)
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    return ids[i] if i < len(ids) else None


def world_size(dist: Mapping[str, Any] | None) -> int:
    """The world size a record's ``dist`` block gives (1 for a record without one)."""
    v = (dist or {}).get("world_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1


def rank_record_path(path: str | os.PathLike, rank: int) -> Path:
    """Where rank ``rank`` writes the record asked for at ``path``: ``run.json`` ->
    ``run.rank3.json`` (``run`` -> ``run.rank3``); a directory (an existing one, or a path ending in
    ``/``) -> ``DIR/run.rank3.json``; a device or FIFO (``/dev/null``) is written as it is."""
    text = os.fspath(path)
    p = Path(text)
    if text.endswith(("/", os.sep)) or p.is_dir():
        return p / f"run.rank{rank}.json"
    if p.exists() and not p.is_file():
        return p  # /dev/null, a FIFO: every rank writes into it
    if p.suffix:
        return p.with_name(f"{p.stem}.rank{rank}{p.suffix}")
    return p.with_name(f"{p.name}.rank{rank}")


__all__ = ["DIST_KEYS", "LAUNCH_VARS", "launch_info", "physical_gpu", "rank_record_path", "world_size"]
