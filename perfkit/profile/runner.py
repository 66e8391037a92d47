"""Running a script or a module in-process under a :class:`perfkit.profile.session.Session`.

The program must not notice. It runs as ``python SCRIPT`` / ``python -m MODULE`` would run it: in a
fresh ``__main__`` module (``sys.modules["__main__"]``) whose globals are the ones the interpreter
gives (``__file__`` absolute, ``__spec__``, ``__loader__``, ``__package__``, ``__cached__``,
``__builtins__`` the module, ``__annotations__`` where this Python makes it), ``sys.argv[0]`` as
Python sets it (the script as given; the module's file for ``-m``), ``sys.path[0]`` the script's
real directory (the working directory for ``-m``) in place of perfkit's own first entry, which moves
to the end of the path. Its stdout, stderr and exit status pass through:
an uncaught exception goes to ``sys.excepthook`` (the interpreter's own hook, or whatever the program
or torch.distributed installed there: ``[rank1]:`` prefixes) with perfkit's frames taken out of its
traceback, and exits 1; ``sys.exit(n)`` exits ``n``, Ctrl-C exits 130 and SIGTERM while the program
runs 143.

Whatever ends the run, the session is closed (every hook removed), the record is built with
``status = "partial"`` when the program did not finish normally (``exit_code`` its own exit status,
``extra["error"]`` its exception in one line, ``extra["ended_at"]`` when it ended) and handed to
``on_exit``. From the moment the program has ended until ``on_exit`` returns, SIGTERM no longer
interrupts: a launcher that terminates the other ranks once one has failed (torchrun does) must not
cost them their records. A program that ends the process with ``os._exit(n)`` (RL launchers do, to
skip slow interpreter teardown) does not unwind: for the run's duration ``os._exit`` first finishes
the session and calls ``on_exit``, then exits with the code it returns.

Before anything runs the target is checked: it exists, and it compiles (a syntax error is reported
as Python reports it, without running anything or writing a record).
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib.machinery
import importlib.util
import os
import runpy
import signal
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

import perfkit
from perfkit.record import EXTRA_ENDED_AT, EXTRA_ERROR, Run

_PERFKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # perfkit/
_PROGRAM_DIRS = tuple(os.path.join(_PERFKIT_DIR, d) + os.sep for d in ("envs", "rl"))  # programs, not instrumentation


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
        spec = _module_spec(target)
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


def _module_spec(target: str) -> Any:
    """The spec ``python -m target`` runs (a package's ``__main__``), looked up as Python does, with
    the working directory first on the path; TargetError when there is none."""
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
        return spec
    finally:
        if sys.path and sys.path[0] == cwd:
            del sys.path[0]


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


# ---- the program as Python would run it --------------------------------------------------------------

class _Program:
    """What ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` sets up: the code, ``__main__``'s
    globals, ``sys.argv`` and ``sys.path[0]``. A directory or zip archive runs through runpy, as
    Python runs it."""

    def __init__(self, target: str, path: str, module: bool, args: list[str]):
        self.target, self.module = target, module
        self.code: Any = None
        g: dict[str, Any] = {"__name__": "__main__", "__doc__": None, "__builtins__": builtins}
        if sys.version_info < (3, 14):
            g["__annotations__"] = {}  # the interpreter's __main__ has one (until lazy annotations)
        if module:
            spec = _module_spec(target)
            self.argv0 = spec.origin or target
            self.path0 = os.getcwd()
            g.update(__file__=spec.origin, __cached__=spec.cached, __loader__=spec.loader, __package__=spec.parent,
                     __spec__=spec)
            self.code = spec.loader.get_code(spec.name)
        elif os.path.isfile(path) and not path.endswith(".zip"):
            full = os.path.abspath(path)
            self.argv0 = target
            self.path0 = os.path.dirname(os.path.realpath(path))
            g.update(__file__=full, __cached__=None, __loader__=importlib.machinery.SourceFileLoader("__main__", full),
                     __package__=None, __spec__=None)
            self.code = compile(Path(path).read_bytes(), full, "exec", dont_inherit=True)
        else:  # a directory or a zip archive with __main__.py
            self.argv0 = target
            self.path0 = None  # runpy puts the archive first on the path
        self.path = path
        self.argv = [self.argv0, *args]
        self.globals = g

    def execute(self) -> None:
        if self.code is None:
            runpy.run_path(self.path, run_name="__main__")
            return
        main = types.ModuleType("__main__")
        main.__dict__.update(self.globals)
        self.globals = main.__dict__
        saved = sys.modules.get("__main__")
        sys.modules["__main__"] = main
        try:
            exec(self.code, main.__dict__)
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved


def _is_instrumentation(filename: str) -> bool:
    """perfkit's own frames (not its reference env and learner, which are programs) and runpy's."""
    if filename.startswith("<frozen runpy") or os.path.basename(filename) == "runpy.py":
        return True
    real = os.path.realpath(filename) if filename and not filename.startswith("<") else filename
    return real.startswith(_PERFKIT_DIR + os.sep) and not real.startswith(_PROGRAM_DIRS)


def _without_perfkit(e: BaseException, seen: set[int] | None = None) -> None:
    """Take perfkit's frames out of the traceback of ``e`` and of the exceptions it chains: what
    remains is the traceback the program raises without perfkit. An exception raised inside perfkit
    itself (its innermost frame is perfkit's) keeps every frame."""
    seen = set() if seen is None else seen
    if id(e) in seen:
        return
    seen.add(id(e))
    frames = []
    t = e.__traceback__
    while t is not None:
        frames.append(t)
        t = t.tb_next
    if frames and not _is_instrumentation(frames[-1].tb_frame.f_code.co_filename):
        kept = [t for t in frames if not _is_instrumentation(t.tb_frame.f_code.co_filename)]
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        if kept:
            kept[-1].tb_next = None
        e.__traceback__ = kept[0] if kept else None
    for other in (e.__cause__, e.__context__):
        if other is not None:
            _without_perfkit(other, seen)


def _report_uncaught(e: BaseException) -> None:
    """Hand the program's uncaught exception to ``sys.excepthook``, as the interpreter does."""
    _without_perfkit(e)
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except BaseException:  # a broken hook: Python prints the exception itself
        traceback.print_exception(type(e), e, e.__traceback__)


# ---- SIGTERM -------------------------------------------------------------------------------------------

class _Terminate:
    """SIGTERM while the program runs ends it (``SystemExit(143)``, so that it unwinds and its record
    is written); once it has ended (:meth:`hold`), SIGTERM is noted and ignored until the record is
    written and :meth:`restore` puts the old handler back."""

    def __init__(self) -> None:
        self.running = True
        self.received = False
        self.old: Any = None
        try:
            if threading_is_main() and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                self.old = signal.signal(signal.SIGTERM, self._handler)
        except (ValueError, OSError):  # pragma: no cover
            self.old = None

    def _handler(self, signum, frame):
        self.received = True
        if self.running:
            raise SystemExit(128 + signum)

    def hold(self) -> None:
        self.running = False
        if self.old is not None:  # a handler the program put in its place would still raise
            try:
                signal.signal(signal.SIGTERM, self._handler)
            except (ValueError, OSError):  # pragma: no cover
                pass

    def restore(self) -> None:
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
            self.old = None


def run(target: str, args: list[str] | None = None, *, module: bool = False, session_kwargs: dict | None = None,
        on_exit: Callable[[Outcome], int] | None = None) -> Outcome:
    """Run ``target`` (a script path, or a module name with ``module=True``) under a Session.

    ``on_exit(outcome) -> exit code`` (it writes the record) is called once the session is finished,
    however the program ended, ``os._exit`` included, with SIGTERM held off; the returned outcome's
    ``exit_code`` is what it returned (the program's own status stays in ``outcome.run.exit_code``).
    """
    from perfkit.profile.session import Session

    args = list(args or [])
    path = check_target(target, module)
    program = _Program(target, path, module, args)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    command = (["-m", target] if module else [target]) + args
    session = Session(command=command, **(session_kwargs or {}))
    session.launched_at = perfkit.IMPORTED_AT  # perfkit's imports and checks before the session are its start-up too
    term = _Terminate()

    def record(code: int, error: BaseException | None) -> Run:
        term.hold()
        run = session.finish("complete" if code == 0 else "partial")
        run.exit_code = code
        run.extra[EXTRA_ENDED_AT] = ended[0] if ended else time.time()
        if error is not None:
            run.extra[EXTRA_ERROR] = "".join(traceback.format_exception_only(type(error), error)).strip()
        return run

    def before_exit(n: int) -> int:
        """``os._exit`` while the program runs: finish the session and hand over the record first."""
        ended.append(time.time())
        outcome = Outcome(n, record(n, None))
        return on_exit(outcome) if on_exit is not None else n

    ended: list[float] = []
    restore_exit = intercept_os_exit(before_exit)
    error: BaseException | None = None
    code = 0
    try:
        sys.argv = program.argv
        if program.path0 is not None:
            # the program's directory replaces perfkit's own first entry (the directory `python -m perfkit`
            # ran in, or the console script's), which moves to the end: perfkit imports lazily from it,
            # and it shadows nothing of the program's there
            launched_from = sys.path[:1]
            sys.path[:1] = [program.path0]
            sys.path.extend(p for p in launched_from if p not in sys.path)
        with session:
            try:
                program.execute()
            except SystemExit as e:
                term.running = False
                ended.append(time.time())
                code = _exit_code(e)
            except BaseException as e:  # the program's own crash (Ctrl-C included): as Python reports it
                term.running = False
                ended.append(time.time())
                code, error = (130 if isinstance(e, KeyboardInterrupt) else 1), e
                _report_uncaught(e)
            finally:
                term.running = False
                outcome = Outcome(code, record(code, error))
        restore_exit()
        if on_exit is not None:
            outcome.exit_code = on_exit(outcome)
    finally:
        restore_exit()
        sys.argv, sys.path[:] = saved_argv, saved_path
        term.restore()
    return outcome


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
