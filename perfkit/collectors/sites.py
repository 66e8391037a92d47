"""Sites: which frame of a stack is *user code* — the line a finding is reported at.

A sync that happens deep inside torch, warp or perfkit itself is reported at the first frame on the
stack that belongs to the user's program: the line they can change. "User code" is every file that is
not in the standard library, not in an installed package (site-packages), and not part of perfkit's
own instrumentation. perfkit's reference env (``perfkit/envs``) and learner (``perfkit/rl``) count as
user code: they are what ``perfkit.budget`` proves sync-free, so a sync there must point there.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from types import FrameType

_PERFKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Parts of the perfkit package that are programs under test, not instrumentation.
_PERFKIT_USER_DIRS = tuple(os.path.join(_PERFKIT_DIR, d) + os.sep for d in ("envs", "rl"))


def _library_roots() -> tuple[str, ...]:
    roots: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            roots.add(os.path.realpath(paths[key]))
    try:
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    except AttributeError:  # virtualenvs with an old site.py
        pass
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        roots.add(os.path.realpath(user_site))
    for p in sys.path:  # dist-packages on Debian-style Pythons, eggs
        if p.endswith(("site-packages", "dist-packages")):
            roots.add(os.path.realpath(p))
    return tuple(sorted(r + os.sep for r in roots))


_LIB_ROOTS = _library_roots()
_cache: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """True when ``filename`` (a code object's ``co_filename``) is the user's code. Cached per file."""
    r = _cache.get(filename)
    if r is not None:
        return r
    if not filename or filename.startswith("<"):
        r = False  # <frozen importlib._bootstrap>, <string>, <stdin>
    else:
        real = os.path.realpath(filename)
        if real.startswith(_PERFKIT_USER_DIRS):
            r = True
        elif real.startswith(_PERFKIT_DIR + os.sep):
            r = False
        else:
            r = not real.startswith(_LIB_ROOTS)
    _cache[filename] = r
    return r


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame, walking outwards from ``frame``, that is user code; None when there is none."""
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def site_of(frame: FrameType | None) -> tuple[str, int, str]:
    """``(filename, line, function)`` of the first user frame from ``frame`` outwards.

    Where no frame is user code (a sync inside a library called from a library), the outermost
    non-perfkit frame stands in, so nothing is ever silently dropped."""
    f = user_frame(frame)
    if f is not None:
        return f.f_code.co_filename, f.f_lineno, f.f_code.co_name
    last = None
    while frame is not None:
        fn = frame.f_code.co_filename
        if not os.path.realpath(fn).startswith(_PERFKIT_DIR + os.sep):
            last = frame
        frame = frame.f_back
    if last is None:
        return "<unknown>", 0, ""
    return last.f_code.co_filename, last.f_lineno, last.f_code.co_name
