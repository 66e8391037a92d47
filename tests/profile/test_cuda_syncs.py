"""The runtime's own sync detection as perfkit's counter (collectors/cuda_syncs.py).

On CPU the mechanism is driven the way torch drives it on CUDA: a C-level function issues the warning
``"called a synchronizing CUDA operation"`` from inside a call, in the caller's Python frame (torch's
``PyWarningHandler`` does the same when an op that synced returns). The GPU end-to-end check (each
runtime sync counted once, none for calls that do not sync) is ``scripts/gpu/sync_debug_check.py`` and
the gpu-marked test below."""

from __future__ import annotations

import functools
import os
import sys
import warnings

import pytest

from perfkit.collectors import cuda_syncs
from perfkit.collectors.patches import Patcher


class FakeCuda:
    def __init__(self, mode=0):
        self.mode = mode

    def get_sync_debug_mode(self):
        return self.mode

    def set_sync_debug_mode(self, mode):  # torch warns on every call that the mode is a prototype
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet detect all "
                      "synchronizing operations", UserWarning)
        self.mode = {"warn": 1, "default": 0}.get(mode, mode)


class FakeTorch:
    def __init__(self, mode=0):
        self.cuda = FakeCuda(mode)


# a C-level callable that warns as torch does after a synchronizing op (the warning names the caller;
# torch's C++ warnings carry where they were raised after the message)
synchronizing = functools.partial(warnings.warn, cuda_syncs.MESSAGE + " (Triggered internally at "
                                  "/pytorch/c10/cuda/CUDAFunctions.cpp:171.)", UserWarning)


class Tensorish:
    item = staticmethod(synchronizing)

    def __getitem__(self, idx):  # a Python frame of its own: the label comes from *its* instruction
        synchronizing()


class _NoInit:
    """torch as the CUDA build has it: the sync-debug mode is a flag behind ``torch._C``; the
    ``torch.cuda`` wrappers would make a CUDA context first (here: they refuse)."""

    def __init__(self):
        self.mode = 0
        self.cuda = self
        self._C = self

    def get_sync_debug_mode(self):
        raise AssertionError("torch.cuda.get_sync_debug_mode() initialises CUDA")

    set_sync_debug_mode = get_sync_debug_mode

    def _cuda_get_sync_debug_mode(self):
        return self.mode

    def _cuda_set_sync_debug_mode(self, mode):
        self.mode = mode


def test_the_mode_is_switched_without_initialising_cuda():
    """At a session's start the program has not chosen its device: torch.cuda's own mode functions would
    make a context on GPU 0 (every rank of a job); the flag is read and set through torch._C."""
    rs, _, _ = _session()
    p, torch = Patcher(), _NoInit()
    assert rs.install(p, torch) and torch.mode == cuda_syncs.WARN
    assert rs.pause() and torch.mode == 0
    rs.resume()
    assert torch.mode == cuda_syncs.WARN
    p.undo()
    assert torch.mode == 0


def _session(inside=lambda: False):
    events, in_hook = [], []
    rs = cuda_syncs.RuntimeSyncs(lambda frame: events.append((frame.f_code.co_name, frame.f_lineno,
                                                               cuda_syncs.op_label(frame))),
                                 inside, lambda: in_hook.append(1))
    return rs, events, in_hook


def test_each_runtime_warning_is_one_sync_at_the_calling_line_with_its_expression():
    rs, events, _ = _session()
    p, torch = Patcher(), FakeTorch()
    assert rs.install(p, torch) and torch.cuda.mode == 1
    t = Tensorish()
    try:
        def user_step():
            t.item()
            x = [synchronizing() for _ in range(2)]
            return x
        for _ in range(3):
            user_step()
    finally:
        p.undo()
    assert torch.cuda.mode == 0
    lines = sorted({ln for _, ln, _ in events})
    assert len(events) == 9 and len(lines) == 2
    item_line = min(lines)  # (by line: Python 3.12 runs the comprehension in user_step's own frame)
    assert [e[2] for e in events if e[1] == item_line] == [".item()"] * 3
    assert [e[2] for e in events if e[1] != item_line] == ["synchronizing()"] * 6


def test_a_warning_inside_a_hooked_call_counts_for_that_hook_not_as_a_new_sync():
    rs, events, in_hook = _session(inside=lambda: True)
    p = Patcher()
    rs.install(p, FakeTorch())
    try:
        Tensorish().item()
        Tensorish().item()
    finally:
        p.undo()
    assert events == [] and in_hook == [1, 1]


def test_other_warnings_pass_through_and_everything_is_put_back():
    rs, events, _ = _session()
    p = Patcher()
    before_filters, before_show = list(warnings.filters), warnings._showwarnmsg
    rs.install(p, FakeTorch())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in caught] == ["something else"] and events == []
    p.undo()
    assert warnings.filters == before_filters and warnings._showwarnmsg is before_show


def test_switching_the_mode_says_nothing_on_the_programs_stderr(capfd):
    rs, _, _ = _session()
    p = Patcher()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        rs.install(p, FakeTorch())
        p.undo()
    assert capfd.readouterr().err == ""


def test_a_sync_debug_mode_the_user_set_is_left_alone():
    rs, _, _ = _session()
    p, torch = Patcher(), FakeTorch(mode=2)
    assert rs.install(p, torch) is False and torch.cuda.mode == 2
    p.undo()
    assert torch.cuda.mode == 2


@pytest.mark.skipif(sys.version_info < (3, 11), reason="instruction positions are Python 3.11+")
@pytest.mark.parametrize("src, label", [
    ("x.item()", ".item()"),
    ("torch.tensor([1.0], device=d)", "torch.tensor()"),
    ("torch.cuda.synchronize()", "torch.cuda.synchronize()"),
    ("bool(x)", "bool()"),
    ("x[m]", "t[...]"),
    ("x[[1, 2]]", "t[list]"),
    ("x[x > 0]", "t[bool_mask]"),
    ("x[m.done_mask]", "t[bool_mask]"),
])
def test_labels_name_the_expression_being_executed(tmp_path, src, label):
    path = tmp_path / "prog.py"
    path.write_text("import sys\n\ndef f(x, m, d, torch, bool):\n    return " + src + "\n")
    seen = []

    class Probe:
        def __getattr__(self, name):
            return self

        def __call__(self, *a, **k):
            seen.append(cuda_syncs.op_label(sys._getframe(1)))
            return self

        def __getitem__(self, i):
            seen.append(cuda_syncs.op_label(sys._getframe(1)))
            return self

        def __gt__(self, other):
            return self

    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    probe = Probe()
    ns["f"](probe, probe, probe, probe, probe)
    assert seen and seen[-1] == label


@pytest.mark.skipif(sys.version_info < (3, 11), reason="instruction positions are Python 3.11+")
@pytest.mark.parametrize("stmt, label", [
    ("x[i] = 0.0", "t[idx] = scalar"),
    ("x[5] = 1", "t[i] = scalar"),
    ("x[i] = y", "t[...] = v"),
    ("x[x > 0] = y", "t[bool_mask] = v"),
    ("x[[1, 2]] = y", "t[list] = v"),
    ("x[[0, 1]] = 0.0", "t[list] = v"),  # a list index first, as the hooks decide (the H200's list_write case)
])
def test_a_store_through_an_index_is_labelled_as_a_write(tmp_path, stmt, label):
    path = tmp_path / "w.py"
    path.write_text(f"def f(x, i, y):\n    {stmt}\n")
    seen = []

    class T:
        def __setitem__(self, i, v):
            seen.append(cuda_syncs.op_label(sys._getframe(1)))

        def __gt__(self, other):
            return self

    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    ns["f"](T(), 3, 2)
    assert seen == [label]


@pytest.mark.gpu
def test_on_cuda_runtime_syncs_are_counted_once_and_non_syncing_calls_not_at_all():
    torch = pytest.importorskip("torch")
    rs, events, _ = _session()
    p = Patcher()
    assert rs.install(p, torch)
    x = torch.randn(1024, device="cuda")
    idx = torch.arange(10, device="cuda")
    try:
        def step():
            x[idx]          # a tensor index read: no sync
            x[1:10]         # a slice: no sync
            x.to("cuda")    # already there: no sync
            x[x > 0]        # a mask read: one sync
            x[0].item()     # one sync
            x[[1, 2]]       # a list index: one sync (the index's copy)
        for _ in range(5):
            step()
    finally:
        p.undo()
    assert len(events) == 15
    assert sorted({e[2] for e in events}) == [".item()", "t[bool_mask]", "t[list]"]


# ---- the hub's use of it: a CUDA run where the runtime reports syncs (driven here by a fake torch) ------


@pytest.fixture
def runtime_hub(monkeypatch):
    from perfkit.collectors import hub

    sink = hub.Sink()
    p = Patcher()
    rs = cuda_syncs.RuntimeSyncs(hub._runtime_sync, hub._inside_hook, hub._count_in_hook)
    assert rs.install(p, FakeTorch())
    monkeypatch.setattr(hub, "runtime", rs)
    monkeypatch.setattr(hub, "count_cpu", False)
    monkeypatch.setattr(hub, "sinks", [sink])
    monkeypatch.setattr(hub, "sync_sinks", [sink])
    try:
        yield hub, sink
    finally:
        p.undo()


def _events(sink):
    return {(op, line): c[0] for (kind, op, fn, line, func, thread, would), c in sink.counts.items()}


def test_a_hooked_call_counts_only_the_syncs_the_runtime_reported_inside_it(runtime_hub):
    hub, sink = runtime_hub
    here = sys._getframe()
    hub.sync_call(synchronizing, ".item()", here, (), {})            # the runtime waited: one sync
    hub.sync_call(lambda: None, ".item()", here, (), {})              # it did not: nothing
    hub.sync_call(lambda: (synchronizing(), synchronizing()), ".cpu()", here, (), {})  # two waits in one call
    hub.sync_call(lambda: None, "torch.cuda.synchronize()", here, (), {}, confirm=False)  # not reported: counted
    counted = {op: n for (op, line), n in _events(sink).items()}
    assert counted == {".item()": 1, ".cpu()": 2, "torch.cuda.synchronize()": 1}


def test_a_sync_outside_every_hook_is_one_finding_at_its_line_named_in_the_vocabulary(runtime_hub, tmp_path):
    hub, sink = runtime_hub
    path = tmp_path / "user_env.py"
    path.write_text("def step(x, m):\n    a = x[m]\n    x[m] = 0.0\n    return a\n")
    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)

    class T:  # C-level item access that warns from the caller's frame, as torch's own does (m: stacklevel 1)
        __getitem__ = synchronizing
        __setitem__ = synchronizing

    for _ in range(3):
        ns["step"](T(), 1)
    got = {op: n for (op, line), n in _events(sink).items() if line in (2, 3)}
    assert got == {"t[...]": 3, "t[idx] = scalar": 3}  # a read through a name: which kind, its expression cannot say
    assert hub.sync_op("t[...]").lint_rule == "PK107" and hub.sync_op("t[...] = v").kind == "h2d copy"


def test_a_sync_perfkit_itself_makes_is_not_the_programs(runtime_hub):
    hub, sink = runtime_hub
    hub.tls.depth += 1  # perfkit's own work (the scheduler, the record) runs with the hooks quiet
    try:
        synchronizing()
    finally:
        hub.tls.depth -= 1
    assert sink.counts == {}


def test_an_op_perfkit_passes_on_is_the_programs_at_the_programs_line(runtime_hub, tmp_path):
    """On a sampled step the allocation mode's __torch_function__ (a perfkit frame) runs each op: a sync
    there is the program's, at its line, named from its expression — not dropped, not 'call()'."""
    hub, sink = runtime_hub
    from perfkit.collectors import sites

    ns = {"synchronizing": synchronizing}  # a perfkit frame that runs the op for the program
    exec(compile("def torch_function(*a):\n    return synchronizing()\n",
                 os.path.join(os.path.dirname(sites.__file__), "x.py"), "exec"), ns)
    user = tmp_path / "user_loop.py"
    user.write_text("def step(x):\n    return x.item()\n")
    un = {}
    exec(compile(user.read_text(), str(user), "exec"), un)

    class T:
        item = staticmethod(ns["torch_function"])

    un["step"](T())
    assert [(op, line) for (op, line) in _events(sink)] == [(".item()", 2)]


@pytest.mark.gpu
def test_a_session_start_leaves_cuda_uninitialised_on_a_gpu_machine():
    """A fresh process: entering a session (the runtime's detection on) makes no CUDA context; the program's
    first CUDA call does, on the device it chose."""
    import subprocess
    import sys as _sys

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    code = ("import torch\nfrom perfkit.profile.session import Session\n"
            "s = Session(); s.__enter__()\n"
            "from perfkit.collectors import hub\n"
            "print(hub.installed_sync_source, torch.cuda.is_initialized())\n"
            "s.finish()\n")
    out = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["runtime", "False"]
