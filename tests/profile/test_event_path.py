"""The flat sync-event path (issue 23.2): a sync's site is found once per code object and instruction,
code objects are looked up by identity, and the calibration that prices the path in the record's
``self`` block is not run under the discovery window's profiler."""

from __future__ import annotations

import importlib

import os
import sys
import sysconfig
import textwrap
from time import perf_counter

import pytest
import torch

from perfkit.collectors import hub, regions, self_cost, sites
from perfkit.profile.session import Session

LIB_FILE = os.path.join(sysconfig.get_paths()["purelib"], "perfkit_test_lib", "util.py")
USER_FILE = "/perfkit-test/train.py"


def _compile(src: str, filename: str, **ns) -> dict:
    exec(compile(textwrap.dedent(src), filename, "exec"), ns)
    return ns


def _sites_at_lines():
    """``site_of`` taken while a frame runs: at two lines of one user function (twice at the first),
    and in a library function called from a user line."""
    probe = lambda: sites.site_of(sys._getframe(1))  # noqa: E731 - the site of the probe's caller, now
    lib = _compile("""
        def inner(probe):
            return probe()
    """, LIB_FILE)
    user = _compile("""
        def two(probe):
            a = [probe() for _ in range(2)]
            b = probe()
            return a, b

        def via_library(probe):
            return inner(probe)
    """, USER_FILE, inner=lib["inner"])
    return user["two"](probe), lambda: user["via_library"](probe)


def test_the_site_is_made_once_per_code_and_instruction():
    ((a1, a2), b), _ = _sites_at_lines()
    # (Python 3.12 runs a list comprehension inside its function: no <listcomp> frame of its own)
    assert a1 == (USER_FILE, 3, "<listcomp>" if sys.version_info < (3, 12) else "two")
    assert a2 is a1  # the same tuple: looked up, not made again
    assert b == (USER_FILE, 4, "two")


def test_a_library_site_and_the_user_code_only_site_of_the_same_frame():
    _, via_library = _sites_at_lines()
    assert via_library() == (LIB_FILE, 3, "inner")
    sites.user_code_only = True
    try:
        # the cache is per setting: the same code now reports at the user's line that called the library
        assert via_library() == (USER_FILE, 8, "via_library")
    finally:
        sites.user_code_only = False
    assert via_library() == (LIB_FILE, 3, "inner")


def test_a_package_made_runtime_later_is_looked_through(tmp_path, monkeypatch):
    pkg = tmp_path / "pk_runtime_later"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import sys\n\ndef here():\n    return sys._getframe()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pk_runtime_later = importlib.import_module("pk_runtime_later")  # made just above: no distribution brings it

    user = _compile("def call(f):\n    return site_of(f())\n", USER_FILE, site_of=sites.site_of)
    assert user["call"](pk_runtime_later.here)[0] == str(pkg / "__init__.py")  # the user's own package: there
    sites.set_runtime(("pk_runtime_later",))
    try:
        assert user["call"](pk_runtime_later.here) == (USER_FILE, 2, "call")  # its code's cached kind was forgotten
    finally:
        sites.set_runtime()
        sys.modules.pop("pk_runtime_later", None)


def test_code_objects_are_looked_up_by_identity():
    src = "def w(f):\n    return f()\n"
    one = _compile(src, USER_FILE)["w"]
    twin = _compile(src, USER_FILE)["w"]  # equal code, another object
    assert one.__code__ == twin.__code__ and one.__code__ is not twin.__code__
    s = hub.CodeSet()
    s.add(one.__code__)
    assert one.__code__ in s and twin.__code__ not in s
    regions.install(one.__code__, {}, "other/loop")
    try:
        assert one(regions.outside) == "other/loop"  # outside() called from w's frame finds the loop
        assert twin(regions.outside) == "other"
    finally:
        regions.clear()


def _counted(s: Session) -> dict:
    return {(k[2], k[3]): c[0] for k, c in s.sink.counts.items() if k[0] == "sync" and k[7] == "steady"}


def test_a_library_site_counts_at_its_line_and_keeps_its_chain():
    t = torch.ones(1)
    lib = _compile("""
        def read(t):
            return t.item()
    """, LIB_FILE)
    user = _compile("""
        def first(t):
            return read(t)

        def second(t):
            return read(t)
    """, USER_FILE, read=lib["read"])

    class Env:
        num_envs = 4

        def step(self, a):
            return a

    env = Env()
    with Session(warmup_steps=2, count_cpu_tensors=True) as s:
        for _ in range(12):
            env.step(t)
            user["first"](t)
            user["first"](t)
            user["second"](t)
    steady = s.clock.index - 2
    assert _counted(s) == {(LIB_FILE, 3): 3 * steady}  # one site, every call counted
    chain = s.sink.chains[("sync", ".item()", LIB_FILE, 3)]
    assert chain == ((LIB_FILE, 3), (USER_FILE, 3))  # back to the user's line that first reached it


def test_the_calibration_runs_outside_the_discovery_window(monkeypatch):
    seen = []
    real = self_cost.calibrate

    spent = []

    def spy(torch_mod):
        mon = getattr(sys, "monitoring", None)
        seen.append((sys.getprofile(), mon.get_tool(mon.PROFILER_ID) if mon is not None else None))
        t0 = perf_counter()
        try:
            return real(torch_mod)
        finally:
            spent.append(perf_counter() - t0)

    monkeypatch.setattr(self_cost, "calibrate", spy)
    with Session(warmup_steps=2, count_cpu_tensors=True) as s:
        pass
    assert seen == [(None, None)]  # no profile function times the calibrated calls
    assert set(s.run.self.per_call_us) == {"hooked_call", "segment_transition", "sync_event", "sync_emit"}
    # a one-off cost of the start: inside the session's start-up (one clock, nested intervals)
    assert s.run.self.startup_s >= round(spent[0], 6) - 1e-6


@pytest.mark.parametrize("would", [True, False])
def test_a_sync_is_timed_only_where_the_host_waited(would):
    """A would-sync (a CPU-only run) waits for nothing: no wait is reported for it; a real one is."""
    waits = []
    sink = hub.Sink()
    hub.sinks.append(sink)
    hub.wait_listeners.append(lambda site, t0, t1: waits.append((site, t1 >= t0)))
    try:
        frame = _compile("def f(g):\n    return g()\n", USER_FILE)["f"](sys._getframe)
        out = hub.sync_call(lambda x: x + 1, ".item()", frame, (1,), {}, would=would, confirm=False)
    finally:
        hub.sinks.remove(sink)
        hub.wait_listeners.clear()
    assert out == 2 and sink.total("sync") == 1
    assert waits == ([] if would else [((USER_FILE, 2, "f"), True)])
