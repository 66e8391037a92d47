"""Renderers: one module per output, each formatting data it is given and computing nothing.

* :mod:`~perfkit.renderers.console` — the run summary ``perfkit profile`` prints;
* :mod:`~perfkit.renderers.plots` — the report's PNG figures;
* :mod:`~perfkit.renderers.html` — ``index.html`` (jinja2, plots embedded);
* :mod:`~perfkit.renderers.markdown` — ``report.md``;
* :mod:`~perfkit.renderers.perfetto` — a Chrome/Perfetto trace of a run's timeline.

What a report shows is built by :mod:`perfkit.analysis.report_model`; :func:`write_report` puts
its three outputs in one directory.
"""

from __future__ import annotations

from pathlib import Path


def write_report(rep, out_dir: str | Path) -> dict[str, object]:
    """Draw the figures of ``rep`` (a :class:`perfkit.analysis.report_model.Report`), then write
    ``index.html`` and ``report.md`` beside them. Returns ``{"html": path, "md": path, "png": [paths]}``."""
    from perfkit.renderers import html, markdown, plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots.draw_report(rep, out)
    paths: dict[str, object] = {"html": html.write(rep, out / "index.html"), "md": markdown.write(rep, out / "report.md")}
    paths["png"] = [f.path for f in rep.figures]
    return paths
