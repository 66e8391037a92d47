"""One shape for every renderer: made with its options, ``render(data) -> str``, ``write(data, path)``."""

from __future__ import annotations

import importlib
import inspect
import json

import pytest

from perfkit.record import Finding, Run, SegmentStats
from perfkit.renderers.base import Renderer

OUTPUTS = ["console", "markdown", "html", "perfetto"]


def _renderers(module):
    return [c for c in vars(module).values()
            if inspect.isclass(c) and issubclass(c, Renderer) and c is not Renderer and c.__module__ == module.__name__]


@pytest.mark.parametrize("name", OUTPUTS)
def test_each_output_module_is_one_renderer_and_nothing_else_renders(name):
    module = importlib.import_module(f"perfkit.renderers.{name}")
    found = _renderers(module)
    assert len(found) == 1, f"{name}: {found}"
    cls = found[0]
    assert not inspect.isabstract(cls)
    assert cls.reads in ("run", "report") and cls.extension.startswith(".")
    # the module's old free functions are gone: one way in
    assert not inspect.isfunction(vars(module).get("render")), f"{name} still has a module-level render()"


def _run() -> Run:
    return Run(command=["train.py"], steps=10, num_envs=4, wall_s=1.0, sps=40.0, step_ms={"p50": 100.0, "p99": 120.0},
               segments={"physics": SegmentStats(cpu_ms_per_step=80.0)}, step_times_ms=[100.0] * 10,
               findings=[Finding("sync", ".item()", "train.py", 3, count=10, per_step=1.0, lint_rule="PK101",
                                 message="keep it on the device")],
               machine={"device": "cpu"})


@pytest.mark.parametrize("name", ["console", "perfetto"])
def test_a_run_renderer_writes_what_it_renders(name, tmp_path):
    cls = _renderers(importlib.import_module(f"perfkit.renderers.{name}"))[0]
    r = cls()
    text = r.render(_run())
    assert isinstance(text, str) and text
    path = r.write(_run(), tmp_path / f"out{cls.extension}")
    assert path.read_text() == text


def test_the_console_text_is_plain_unless_it_is_for_a_terminal():
    from perfkit.renderers.console import ConsoleRenderer

    text = ConsoleRenderer(width=200).render(_run())
    assert "\x1b[" not in text
    assert "train.py:3  .item()" in text and "fix: keep it on the device" in text


def test_the_trace_renderer_renders_the_trace():
    from perfkit.renderers.perfetto import PerfettoRenderer, to_trace

    assert json.loads(PerfettoRenderer().render(_run())) == to_trace(_run())
    assert json.loads(PerfettoRenderer(steps=(2, 3)).render(_run())) == to_trace(_run(), (2, 3))


@pytest.mark.parametrize("name", ["markdown", "html"])
def test_a_report_renderer_writes_what_it_renders(name, tmp_path):
    from perfkit.analysis.report_model import build_report

    rep = build_report([_run()])
    rep.figures = []  # the plots are drawn by plots.draw_report, not by these
    cls = _renderers(importlib.import_module(f"perfkit.renderers.{name}"))[0]
    text = cls().render(rep)
    assert "train.py" in text
    assert cls().write(rep, tmp_path / f"report{cls.extension}").read_text() == text
