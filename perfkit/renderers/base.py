"""The one shape of a renderer: an object that turns what it is given into one output's text.

A renderer is configured when it is made (how many findings, which steps, how wide) and has one
method per output: :meth:`Renderer.render` returns the whole output as a string, and
:meth:`Renderer.write` puts that string in a file (atomically, :func:`perfkit.outputs.write_text`).
It reads a :class:`~perfkit.record.Run` (the console summary, the Perfetto trace) or the report's
model (:class:`perfkit.analysis.report_model.Report`: Markdown, HTML) and computes no number of its
own. The plots are not a renderer of this shape: they draw several PNG files
(:func:`perfkit.renderers.plots.draw_report`), which the HTML and Markdown pages then show.
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import Any, ClassVar


class Renderer(abc.ABC):
    """One output format (the model: pyinstrument's ``renderers/base.py``)."""

    extension: ClassVar[str]
    """The output file's extension (``".md"``), for a caller that names the file."""
    reads: ClassVar[str]
    """What :meth:`render` reads: ``"run"`` (a :class:`~perfkit.record.Run`) or ``"report"`` (the report's model)."""

    @abc.abstractmethod
    def render(self, data: Any) -> str:
        """The whole output, as text."""

    def write(self, data: Any, path: str | os.PathLike) -> Path:
        """Write :meth:`render`'s text to ``path`` (a symlink, a device or a FIFO is written to, never
        replaced); raises OSError when it cannot."""
        from perfkit.outputs import write_text

        return write_text(path, self.render(data))
