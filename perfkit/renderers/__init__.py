"""Renderers: one module per output, each formatting data it is given and computing nothing.

Each output is a :class:`~perfkit.renderers.base.Renderer`: made with its options, ``render(data) -> str``
and ``write(data, path)``:

* :class:`~perfkit.renderers.console.ConsoleRenderer` — the run summary ``perfkit profile`` prints;
* :class:`~perfkit.renderers.html.HtmlRenderer` — ``index.html`` (jinja2, plots embedded);
* :class:`~perfkit.renderers.markdown.MarkdownRenderer` — ``report.md``;
* :class:`~perfkit.renderers.perfetto.PerfettoRenderer` — a Chrome/Perfetto trace of a run's timeline.

:mod:`~perfkit.renderers.plots` draws the report's PNG figures, which the HTML and Markdown pages show.

What a report shows is built by :mod:`perfkit.analysis.report_model`; :func:`write_report` puts
its three outputs in one directory.
"""

from __future__ import annotations

from pathlib import Path


def write_report(rep, out_dir: str | Path) -> dict[str, object]:
    """Draw the figures of ``rep`` (a :class:`perfkit.analysis.report_model.Report`), then write
    ``index.html`` and ``report.md`` beside them. Returns ``{"html": path, "md": path, "png": [paths]}``."""
    from perfkit.renderers import plots
    from perfkit.renderers.html import HtmlRenderer
    from perfkit.renderers.markdown import MarkdownRenderer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots.draw_report(rep, out)
    paths: dict[str, object] = {"html": HtmlRenderer().write(rep, out / "index.html"),
                                "md": MarkdownRenderer().write(rep, out / "report.md")}
    paths["png"] = [f.path for f in rep.figures]
    return paths
