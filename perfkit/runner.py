"""Running a script or a module in-process under a :class:`perfkit.session.Session`.

The program must not notice: ``sys.argv`` is what it expects (``[script, *args]``), ``sys.path[0]`` is
the script's directory (the working directory for ``-m``), it runs as ``__main__``; its stdout, stderr
and exit status pass through — an uncaught exception prints its traceback (perfkit's frames trimmed)
and exits 1, ``sys.exit(n)`` exits ``n``, Ctrl-C exits 130 and SIGTERM 143. Whatever ends the run, the
session is closed (every hook removed) and the record is built, with ``status = "partial"`` when the
program did not finish normally. A program that ends the process with ``os._exit(n)`` (RL launchers
do, to skip slow interpreter teardown) does not unwind: for the run's duration ``os._exit`` first
finishes the session and hands the record to ``on_exit`` (which writes it), then exits with ``n``.

Before anything runs the target is checked: it exists, and it compiles (a syntax error is reported
as Python reports it, without running anything or writing a record).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import runpy
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from perfkit.record import Run


class TargetError(Exception):
    """The script or module to run does not exist (the CLI exits 2 with this message)."""


@dataclasses.dataclass
class Outcome:
    exit_code: int
    run: Run


def check_target(target: str, module: bool) -> str:
    """The path of the script (or module file) to run; TargetError when there is none, or when its
    source does not compile."""
    if module:
        # like `python -m`, look in the working directory first
        cwd = os.getcwd()
        sys.path.insert(0, cwd)
        try:
            try:
                spec = importlib.util.find_spec(target)
            except (ImportError, ValueError) as e:
                raise TargetError(f"no module named {target!r} ({e})") from None
            if spec is None:
                raise TargetError(f"no module named {target!r}")
            if spec.submodule_search_locations is not None:  # a package: python -m runs its __main__
                main = importlib.util.find_spec(target + ".__main__")
                if main is None:
                    raise TargetError(f"{target!r} is a package and has no __main__ module")
                spec = main
        finally:
            if sys.path and sys.path[0] == cwd:
                del sys.path[0]
        path = spec.origin or target
        if path.endswith(".py"):
            check_syntax(path)
        return path
    p = Path(target)
    if not p.exists():
        raise TargetError(f"no such script: {target}")
    if p.is_dir():
        if not (p / "__main__.py").is_file():
            raise TargetError(f"{target} is a directory without __main__.py")
        check_syntax(p / "__main__.py")
    elif p.suffix != ".zip":
        check_syntax(p)
    return str(p)


def check_syntax(path: str | os.PathLike) -> None:
    """TargetError carrying Python's own report of a syntax error in ``path`` (named, as Python
    names a script it runs, by its absolute path)."""
    shown = os.fspath(path)
    try:
        source = Path(path).read_bytes()
    except OSError as e:
        raise TargetError(f"cannot read {shown}: {e.strerror}") from None
    try:
        compile(source, os.path.abspath(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes in the source
        text = "".join(traceback.format_exception_only(type(e), e)).rstrip()
        raise TargetError(f"cannot run {shown}: it does not compile; nothing was run\n{text}") from None


def _exit_code(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)  # what Python does with sys.exit("message")
    return 1


def _trimmed(tb: Any, script: str) -> Any:
    """The traceback from the first frame of the user's program on (runner/runpy frames dropped)."""
    here = os.path.dirname(os.path.abspath(__file__))
    t = tb
    while t is not None:
        fn = t.tb_frame.f_code.co_filename
        if not fn.startswith(here) and "runpy" not in os.path.basename(fn) and not fn.startswith("<frozen runpy"):
            return t
        t = t.tb_next
    return tb


def _sigterm(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise SystemExit(128 + signum)


def run(target: str, args: list[str] | None = None, *, module: bool = False, session_kwargs: dict | None = None,
        on_exit: Callable[[Outcome], int] | None = None) -> Outcome:
    """Run ``target`` (a script path, or a module name with ``module=True``) under a Session.

    ``on_exit(outcome) -> exit code`` is called if the program ends the process with ``os._exit``:
    the session is finished first, so ``outcome.run`` is the (partial) record to write; the process
    then exits with the code ``on_exit`` returns.
    """
    from perfkit.session import Session

    args = list(args or [])
    path = check_target(target, module)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    old_term = None
    if threading_is_main():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                old_term = signal.signal(signal.SIGTERM, _sigterm)
        except (ValueError, OSError):  # pragma: no cover
            old_term = None
    command = (["-m", target] if module else [target]) + args
    session = Session(command=command, **(session_kwargs or {}))
    code = 0
    status = "complete"
    def before_exit(n: int) -> int:
        """``os._exit`` while the program runs: finish the session and hand over the record first."""
        run = session.finish("complete" if n == 0 else "partial")
        run.exit_code = n
        return on_exit(Outcome(n, run)) if on_exit is not None else n

    restore_exit = intercept_os_exit(before_exit)
    try:
        if module:
            sys.argv = [path, *args]
            sys.path.insert(0, os.getcwd())
        else:
            sys.argv = [target, *args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        with session:
            try:
                if module:
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                code = _exit_code(e)
                status = "complete" if code == 0 else "partial"
            except KeyboardInterrupt as e:
                traceback.print_exception(type(e), e, _trimmed(e.__traceback__, path))
                code, status = 130, "partial"
            except BaseException as e:  # the program's own crash: print it as Python would
                traceback.print_exception(type(e), e, _trimmed(e.__traceback__, path))
                code, status = 1, "partial"
            finally:
                session.finish(status)
    finally:
        restore_exit()
        sys.argv, sys.path[:] = saved_argv, saved_path
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    assert session.run is not None
    session.run.exit_code = code
    return Outcome(code, session.run)


def intercept_os_exit(before: Callable[[int], int]) -> Callable[[], None]:
    """Until the returned function is called, ``os._exit(n)`` in this process (not in a forked child:
    multiprocessing, DataLoader workers) first runs ``before(n)`` — which returns the code to exit
    with — and flushes stdout and stderr, then exits. RL launchers end with ``os._exit``; whatever
    wraps the program (a session's record, a profiler's trace) must be finished first."""
    real_exit = os._exit
    pid = os.getpid()

    def exit_now(n: int = 0) -> None:
        try:
            if os.getpid() == pid:
                os._exit = real_exit
                n = before(int(n) & 0xFF)
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:
                        pass
        finally:
            real_exit(n)

    os._exit = exit_now

    def restore() -> None:
        os._exit = real_exit

    return restore


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
