"""The ``torch-profiler`` arm of ``perfkit overhead``: a script (or ``-m`` module) run as ``__main__``
inside ``torch.profiler.profile(activities=[CPU, CUDA when present], with_stack=True)`` over the
whole run, the way a user profiles a training script with torch's own profiler.

    python -m perfkit.overhead.profiler_arm SCRIPT [ARGS...]
    python -m perfkit.overhead.profiler_arm -m MODULE [ARGS...]

``sys.argv`` and ``sys.path[0]`` are what ``python SCRIPT ARGS`` would give the script; it exits with
the script's status (an uncaught exception: its traceback, exit 1; Ctrl-C: 130). The profiler is
stopped, and its trace processed, before the process ends, also when the script ends it with
``os._exit``. Last, one line on stderr: ``torch.profiler: N events; run X s, trace processing Y s``.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback


def _events(prof) -> int:
    try:
        return len(prof.profiler.kineto_results.events())
    except Exception:
        return -1


def main(argv: list[str] | None = None) -> int:
    from perfkit.profile.runner import _exit_code, intercept_os_exit

    argv = list(sys.argv[1:] if argv is None else argv)
    module = argv[:1] == ["-m"]
    if module:
        argv = argv[1:]
    if not argv:
        print("usage: python -m perfkit.overhead.profiler_arm [-m MODULE | SCRIPT] [ARGS...]", file=sys.stderr)
        return 2
    target, args = argv[0], argv[1:]

    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    if module:
        sys.argv = [target, *args]  # runpy sets argv[0] to the module's file
        path0 = os.getcwd()
    else:
        sys.argv = [target, *args]
        path0 = os.path.dirname(os.path.abspath(target))
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    prof = profile(activities=activities, with_stack=True)
    times = {"start": time.perf_counter()}

    def finish() -> None:
        if "run_end" in times:
            return
        times["run_end"] = time.perf_counter()
        prof.stop()
        t_done = time.perf_counter()
        print(f"torch.profiler: {_events(prof)} events; run {times['run_end'] - times['start']:.1f} s, "
              f"trace processing {t_done - times['run_end']:.1f} s", file=sys.stderr, flush=True)

    def before_exit(n: int) -> int:  # the script ends the process: stop the profiler first, as perfkit writes its record
        finish()
        return n

    code = 0
    prof.start()
    restore_exit = intercept_os_exit(before_exit)
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        restore_exit()
        finish()
    return code


if __name__ == "__main__":
    sys.exit(main())
