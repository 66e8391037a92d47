"""``index.html``: a self-contained page (CSS inline, plots embedded as PNG data URIs, no scripts).

Rendered with jinja2 and autoescape on, so every user-controlled string — paths, commands, labels,
finding messages, source lines — reaches the page as text, never as markup.
"""

from __future__ import annotations

import base64
from pathlib import Path

from perfkit.renderers.base import Renderer

TEMPLATE = "report.html.j2"


def environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
        autoescape=True,  # the template's name ends in .j2, so select_autoescape would not catch it
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


class HtmlRenderer(Renderer):
    """``index.html`` from the report's model; its figures must already be drawn (``plots.draw_report``)."""

    extension = ".html"
    reads = "report"

    def render(self, report) -> str:
        from perfkit import __version__

        images = {fig.name: data_uri(fig.path) for fig in report.figures if fig.path is not None}
        return environment().get_template(TEMPLATE).render(report=report, images=images, version=__version__)
