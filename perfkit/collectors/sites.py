"""Sites: where a finding is reported — the innermost frame outside the runtime perfkit instruments —
and the chain of frames from there back to the user's own code.

Every source file is one of three kinds (:func:`kind_of`, cached per file):

* **runtime** — what perfkit instruments and no user can change: the standard library, torch, warp,
  numpy, tensordict (and whatever ``[tool.perfkit] runtime`` adds), and perfkit's own instrumentation (all of
  perfkit except its reference env ``perfkit/envs`` and learner ``perfkit/rl``, which are programs
  under test like any library);
* **library** — installed packages (site-packages / dist-packages) and perfkit's env and learner:
  rsl_rl, skrl, an env framework. A sync inside rsl_rl's logger is reported *there*, at its line,
  with the chain back to the user's line that led to it (``rsl_rl/utils/logger.py:146 via
  train.py:55``);
* **user** — everything else: the user's scripts and packages.

With ``user_code_only`` (``[tool.perfkit] user_code_only = true``) findings are reported at the first
user frame instead, as a user who only wants to see their own lines asks.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig
from functools import lru_cache
from types import CodeType, FrameType

from perfkit.source import real_path

RUNTIME_PACKAGES = ("torch", "warp", "numpy", "functorch", "torchgen", "triton", "tensordict")

_PERFKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Parts of the perfkit package that are programs under test, not instrumentation.
_PERFKIT_PROGRAM_DIRS = tuple(os.path.join(_PERFKIT_DIR, d) + os.sep for d in ("envs", "rl"))


def _site_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key):
            roots.add(os.path.realpath(paths[key]))
    try:
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # virtualenvs with an old site.py
        pass
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        roots.add(os.path.realpath(user_site))
    for p in sys.path:  # dist-packages on Debian-style Pythons, eggs; `pip install --target DIR` folders
        if p.endswith(("site-packages", "dist-packages")) or _holds_distributions(p):
            roots.add(os.path.realpath(p))
    return tuple(sorted(r + os.sep for r in roots))


def _holds_distributions(path: str) -> bool:
    """Whether a ``sys.path`` folder holds installed distributions (``*.dist-info``): a folder packages
    were installed into with ``pip install --target`` and put on PYTHONPATH is as much an install as
    site-packages (the project's own checkout on the path holds none)."""
    try:
        return any(name.endswith(".dist-info") for name in os.listdir(path or "."))
    except OSError:
        return False


def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    return tuple(sorted(r + os.sep for r in roots))


def _package_dir(name: str) -> str | None:
    """The directory of top-level package ``name`` without importing it (None when not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0]) + os.sep


_SITE_ROOTS = _site_roots()
_STDLIB_ROOTS = _stdlib_roots()
_runtime_dirs: tuple[str, ...] = ()
_cache: dict[str, str] = {}
_on_behalf: dict[str, bool] = {}  # filename -> runtime code that syncs for its caller (on_behalf)
# id(code) -> (code, findings can sit in it (:func:`reportable`), a call on a host tensor from it counts
# (:func:`counts_on_cpu`)), one table per ``user_code_only``; by identity (a code object's hash reads its
# whole contents, ~1 µs for a large function), each code kept alive so that its id is not reused
_CodeInfo = tuple[CodeType, bool, bool]
_reportable_codes: tuple[dict[int, _CodeInfo], dict[int, _CodeInfo]] = ({}, {})
# (id(code), instruction offset) -> the site ``(file, line, function)`` of a reportable frame there
# (``f_lineno`` reads the code's line table from its start on every access; ``f_lasti`` is a field)
_line_sites: dict[tuple[int, int], tuple[str, int, str]] = {}
user_code_only = False  # report findings at the first user frame (``[tool.perfkit] user_code_only``)


def set_runtime(packages: tuple[str, ...] = ()) -> None:
    """The packages treated as runtime: :data:`RUNTIME_PACKAGES` plus ``packages`` (config)."""
    global _runtime_dirs
    dirs = [d for d in (_package_dir(n) for n in (*RUNTIME_PACKAGES, *packages)) if d]
    _runtime_dirs = tuple(dirs)
    _cache.clear()
    _on_behalf.clear()
    for codes in _reportable_codes:
        codes.clear()
    _line_sites.clear()  # keyed by ids of codes the tables above no longer keep alive


set_runtime()


def kind_of(filename: str) -> str:
    """``"runtime"``, ``"library"`` or ``"user"`` for a code object's ``co_filename`` (see module doc)."""
    k = _cache.get(filename)
    if k is not None:
        return k
    if not filename or filename.startswith("<"):
        k = "runtime"  # <frozen importlib._bootstrap>, <string>, <stdin>: nothing a user can edit
    else:
        real = real_path(filename)
        if real.startswith(_PERFKIT_PROGRAM_DIRS):
            k = "library"
        elif real.startswith(_PERFKIT_DIR + os.sep) or real.startswith(_runtime_dirs):
            k = "runtime"
        elif real.startswith(_SITE_ROOTS):
            k = "library"
        elif real.startswith(_STDLIB_ROOTS):
            k = "runtime"
        else:
            k = "user"
    _cache[filename] = k
    return k


def is_user_file(filename: str) -> bool:
    """The user's own code (not runtime, not an installed library)."""
    return kind_of(filename) == "user"


def is_program_file(filename: str) -> bool:
    """Code perfkit reports on: the user's and libraries' (everything but the runtime it instruments)."""
    return kind_of(filename) != "runtime"


def reportable(filename: str) -> bool:
    """Whether findings can sit in ``filename``: outside the runtime (the user's own code only with
    ``user_code_only``). A call on a CPU tensor counts as would-sync-on-GPU only when made from such a
    file: torch's own ``.item()`` on its bookkeeping tensors is nobody's sync."""
    k = kind_of(filename)
    return k == "user" if user_code_only else k != "runtime"


# Runtime code that makes syncs *for* its caller, on the caller's data: torch.distributions' argument
# validation (``Normal(loc, scale)``, ``log_prob`` call ``bool()`` of a device tensor) and
# ``clip_grad_norm_(error_if_nonfinite=True)``. Such a sync is the caller's: it counts on a CPU-only run
# (would-sync) and sits at the caller's line with this frame first in its chain. Bookkeeping elsewhere
# in torch (an optimizer's step counter ``.item()``) stays nobody's sync.
ON_BEHALF = (
    os.path.join("torch", "distributions") + os.sep,
    os.path.join("torch", "nn", "utils", "clip_grad.py"),
)
def on_behalf(filename: str) -> bool:
    """Whether ``filename`` is runtime code that syncs for its caller (:data:`ON_BEHALF`)."""
    v = _on_behalf.get(filename)
    if v is None:
        v = _on_behalf[filename] = kind_of(filename) == "runtime" and any(p in filename for p in ON_BEHALF)
    return v


def counts_on_cpu(filename: str) -> bool:
    """Whether a sync-prone call on a host tensor made from ``filename`` counts as would-sync-on-GPU:
    made by the program (:func:`reportable`), or by the runtime on its behalf (:func:`on_behalf`)."""
    return reportable(filename) or on_behalf(filename)


def _code_info(code: CodeType) -> _CodeInfo:
    """What :func:`reportable` and :func:`counts_on_cpu` say of ``code``'s file, remembered for the code."""
    fn = code.co_filename
    info = _reportable_codes[user_code_only][id(code)] = (code, reportable(fn), counts_on_cpu(fn))
    return info


def code_counts_on_cpu(code: CodeType) -> bool:
    """:func:`counts_on_cpu` of ``code``'s file, looked up by the code's identity."""
    hit = _reportable_codes[user_code_only].get(id(code))
    return (hit if hit is not None else _code_info(code))[2]


_perfkit_code: dict[str, bool] = {}


def outside_perfkit(frame: FrameType | None) -> FrameType | None:
    """``frame``, or the first frame outwards that is not perfkit's instrumentation (its ``envs/`` and
    ``rl/`` programs are not): the frame whose call made an op that a perfkit frame passed on (the
    allocation mode's ``__torch_function__`` runs the program's op for it). None where only perfkit's
    frames are left."""
    while frame is not None:
        fn = frame.f_code.co_filename
        mine = _perfkit_code.get(fn)
        if mine is None:
            real = real_path(fn) if fn and not fn.startswith("<") else ""
            mine = _perfkit_code[fn] = real.startswith(_PERFKIT_DIR + os.sep) and not real.startswith(
                _PERFKIT_PROGRAM_DIRS)
        if not mine:
            return frame
        frame = frame.f_back
    return None


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame, walking outwards from ``frame``, that findings are reported at (outside the
    runtime; the user's own code with ``user_code_only``); None when there is none."""
    codes = _reportable_codes[user_code_only]
    while frame is not None:
        code = frame.f_code
        hit = codes.get(id(code))
        if hit is None:
            hit = _code_info(code)
        if hit[1]:
            return frame
        frame = frame.f_back
    return None


def site_of(frame: FrameType | None) -> tuple[str, int, str]:
    """``(filename, line, function)`` of the innermost reportable frame from ``frame`` outwards: one
    tuple per code object and instruction, made once (every sync there gets the same site).

    Where no frame is (a sync inside the runtime called from the runtime), the outermost non-perfkit
    frame stands in, so nothing is ever silently dropped."""
    f = user_frame(frame)
    if f is not None:
        key = (id(f.f_code), f.f_lasti)  # the code is kept alive by _reportable_codes: its id is not reused
        s = _line_sites.get(key)
        if s is None:
            code = f.f_code
            s = _line_sites[key] = (code.co_filename, f.f_lineno, code.co_name)
        return s
    last = None
    while frame is not None:
        fn = frame.f_code.co_filename
        if not real_path(fn).startswith(_PERFKIT_DIR + os.sep):
            last = frame
        frame = frame.f_back
    if last is None:
        return "<unknown>", 0, ""
    return last.f_code.co_filename, last.f_lineno, last.f_code.co_name


MAX_CHAIN = 12


def chain_of(frame: FrameType | None) -> tuple[tuple[str, int], ...]:
    """The frames from the site (the first reportable frame from ``frame``) outwards to the first frame
    of the user's own code, runtime frames left out — except, first, the runtime frame that synced on
    the caller's behalf (:func:`on_behalf`): ``((file, line), ...)`` — just the site when it
    is the user's own code. At most :data:`MAX_CHAIN` frames (the user's frame is always the last)."""
    f = user_frame(frame)
    if f is None:
        return ()
    out: list[tuple[str, int]] = []
    if frame is not f and frame is not None and on_behalf(frame.f_code.co_filename):
        out.append((frame.f_code.co_filename, frame.f_lineno))  # the library frame that synced for the caller
    while f is not None:
        fn = f.f_code.co_filename
        k = kind_of(fn)
        if k != "runtime":
            out.append((fn, f.f_lineno))
            if k == "user":
                break
        f = f.f_back
    if len(out) > MAX_CHAIN:
        out = out[: MAX_CHAIN - 1] + out[-1:]
    return tuple(out)


@lru_cache(maxsize=None)
def _distribution(root: str, top: str) -> tuple[str, str | None] | None:
    """``(name, version)`` of the distribution installed in site folder ``root`` that holds top-level
    ``top``: the ``*.dist-info`` folders there whose name starts like ``top`` are read first (their
    ``top_level.txt`` or ``RECORD``), the others only when none of those holds it — not every installed distribution's
    files, as ``importlib.metadata.packages_distributions()`` reads (~0.1 s on a real stack)."""
    from importlib.metadata import Distribution

    try:
        infos = [e for e in os.listdir(root) if e.endswith(".dist-info")]
    except OSError:
        return None
    norm = top.lower().replace("-", "_")
    infos.sort(key=lambda e: not e.lower().replace("-", "_").startswith(norm))
    for info in infos:
        try:
            dist = Distribution.at(os.path.join(root, info))
            tops = (dist.read_text("top_level.txt") or "").split()
            files = "" if top in tops else dist.read_text("RECORD") or ""
        except Exception:  # pragma: no cover - broken metadata must not break a record
            continue
        if top in tops or any(ln.startswith((top + "/", top + ".py,")) for ln in files.splitlines()):
            return dist.metadata["Name"], dist.version
    return None


@lru_cache(maxsize=1024)
def library_of(filename: str) -> str | None:
    """``"name version"`` of the installed distribution ``filename`` belongs to (``"rsl-rl-lib 5.5.1"``),
    for library files; None for the user's code and the runtime."""
    if kind_of(filename) != "library":
        return None
    real = real_path(filename)
    top = site = None
    if real.startswith(_PERFKIT_DIR + os.sep):
        top = "perfkit"
    else:
        for root in _SITE_ROOTS:
            if real.startswith(root):
                site = root
                top = real[len(root):].split(os.sep, 1)[0]
                top = top[:-3] if top.endswith(".py") else top
                break
    if not top:
        return None
    found = _distribution(site.rstrip(os.sep), top) if site else None
    if found is not None:
        return f"{found[0]} {found[1]}" if found[1] else found[0]
    try:
        from importlib.metadata import version

        return f"{top} {version(top)}"
    except Exception:
        return top
