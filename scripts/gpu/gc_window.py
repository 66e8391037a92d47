"""Run a training script (``runpy``, as ``__main__``) and say what Python's garbage collector cost inside
the script's own timed window: the window is the ``SPS:`` line's moment minus the time those env steps
took (``--num-envs x (--iterations - 1) x --num-steps / SPS``, the manager env script's definition).

    python3 scripts/gpu/gc_window.py [--warn-only] SCRIPT [ARGS...]
    python3 -m perfkit profile -q -o R.json scripts/gpu/gc_window.py SCRIPT [ARGS...]

At exit one line ``GC_WINDOW {json}`` goes to stderr: collections and ms per generation inside the
window and over the whole run, each full collection's moment from the window's start and its ms, the
live objects at exit. ``--warn-only`` turns torch's sync-debug
warnings on and catches them the way a CUDA session of perfkit does, keeping nothing (what the runtime's
reports cost without the rest of perfkit).
"""

from __future__ import annotations

import atexit
import gc
import json
import runpy
import sys
import time

_log: list[tuple[float, int, float]] = []  # (end time, generation, seconds)
_t0 = [0.0]
_sps_at: list[tuple[float, float]] = []  # (time, SPS) of each SPS line


def _gc(phase: str, info: dict) -> None:
    if phase == "start":
        _t0[0] = time.perf_counter()
    else:
        now = time.perf_counter()
        _log.append((now, info["generation"], now - _t0[0]))


class _Stdout:
    """stdout as it is, noting the moment of each ``SPS:`` line."""

    def __init__(self, inner):
        self._inner = inner

    def write(self, s):
        if s.startswith("SPS:"):
            try:
                _sps_at.append((time.perf_counter(), float(s.split()[1])))
            except (IndexError, ValueError):
                pass
        return self._inner.write(s)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _arg(argv: list[str], name: str, default: int) -> int:
    return int(argv[argv.index(name) + 1]) if name in argv else default


def _report(argv: list[str]) -> None:
    out: dict = {"whole": {}, "window": {}, "objects_at_exit": len(gc.get_objects())}
    for g in (0, 1, 2):
        ev = [s for _, gen, s in _log if gen == g]
        out["whole"][g] = [len(ev), round(1e3 * sum(ev), 2)]
    if _sps_at:
        t_end, sps = _sps_at[-1]
        steps = _arg(argv, "--num-envs", 4096) * (_arg(argv, "--iterations", 20) - 1) * _arg(argv, "--num-steps", 24)
        t_start = t_end - steps / sps
        out["window_s"] = round(t_end - t_start, 3)
        for g in (0, 1, 2):
            ev = [s for end, gen, s in _log if gen == g and t_start <= end <= t_end]
            out["window"][g] = [len(ev), round(1e3 * sum(ev), 2)]
        # each full collection: when it ended, in seconds from the window's start (< 0: before it), and ms
        out["full"] = [[round(end - t_start, 2), round(1e3 * s, 1)] for end, gen, s in _log if gen == 2]
    print("GC_WINDOW " + json.dumps(out), file=sys.stderr, flush=True)


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "--warn-only":
        argv = argv[1:]
        import torch

        from perfkit.collectors.cuda_syncs import RuntimeSyncs
        from perfkit.collectors.patches import Patcher

        RuntimeSyncs(lambda frame: None, lambda: False, lambda: None).install(Patcher(), torch)
    gc.callbacks.append(_gc)
    sys.stdout = _Stdout(sys.stdout)
    atexit.register(_report, argv)
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
