"""``report.md``: the same report as Markdown (GitHub-flavoured tables), plots linked beside it.

User-controlled strings are escaped for Markdown *and* for the HTML a Markdown renderer passes
through: ``<script>`` in a path shows as text, a ``|`` in a message does not split a table cell.
Only what needs it is escaped, so the file reads as it renders: ``<`` (the one character that
starts HTML), an ``&`` that would read as an entity, and Markdown's own punctuation (backslashed);
``->`` stays ``->``. Text between backticks in perfkit's own sentences (``use `masked_fill_```) is
inline code, as it was written, never a backslash-escaped backtick.
"""

from __future__ import annotations

import re

from perfkit.renderers.base import Renderer

_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")
_ENTITY_LIKE = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def esc(text: object) -> str:
    s = _ENTITY_LIKE.sub("&amp;", str(text))
    s = s.replace("<", "&lt;")  # `>` alone starts nothing: `->` stays as written
    s = _MD_SPECIAL.sub(r"\\\1", s)
    s = s.replace("\r", " ").replace("\n", " ")
    return "\\" + s if s.startswith(">") else s  # not a quote at the start of a line


def code(text: object, cell: bool = False) -> str:
    """Inline code that shows any content as written (a code span: nothing in it is Markdown or
    HTML); ``cell``: inside a table, where a ``|`` must be backslash-escaped."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if not s.strip():
        return ""
    if cell:
        s = s.replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[0] in "` " or s[-1] in "` " else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def prose(text: object, cell: bool = False) -> str:
    """A sentence of perfkit's, escaped like :func:`esc`, its `backticked` parts as inline code."""
    s = str(text)
    out, at = [], 0
    for m in _CODE_SPAN.finditer(s):
        out += [esc(s[at:m.start()]), code(m.group(1), cell)]
        at = m.end()
    out.append(esc(s[at:]))
    return "".join(out)


def table(columns: list[str], rows: list[list[str]], first_col_header: bool = False) -> list[str]:
    out = ["| " + " | ".join(esc(c) for c in columns) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"]
    for row in rows:
        cells = [f"**{esc(v)}**" if (first_col_header and i == 0) else prose(v, cell=True) for i, v in enumerate(row)]
        out.append("| " + " | ".join(cells) + " |")
    return out


class MarkdownRenderer(Renderer):
    """``report.md`` from the report's model (:class:`perfkit.analysis.report_model.Report`)."""

    extension = ".md"
    reads = "report"

    def render(self, report) -> str:
        from perfkit import __version__

        lines = [f"# {esc(report.title)}", "", f"Generated {esc(report.generated)} by perfkit {esc(__version__)}.", ""]
        if report.command:
            lines += ["```", " ".join(str(c).replace("```", "'''") for c in report.command), "```", ""]
        for n in report.notes:
            lines.append(f"> {prose(n)}")
        if report.notes:
            lines.append("")
        lines += ["## Hardware and software", ""]
        lines += table([""] + report.setup_columns, [[label, *vals] for label, vals in report.setup_rows], first_col_header=True)
        lines += ["", "Inputs: " + ", ".join(code(it.source or it.label) for it in report.items), ""]
        if report.run_rows:
            lines += ["## Runs", ""]
            lines += table(report.run_columns, report.run_rows)
            lines.append("")
            for it in report.items:
                if it.run is not None and it.run.command:
                    lines.append(f"* {esc(it.label)}: {code(' '.join(map(str, it.run.command)))}")
            lines.append("")
        for job in getattr(report, "ranks", None) or []:
            lines += [f"## Data-parallel job: {esc(job['label'])}", ""]
            lines += [esc(h) for h in job["headline"]] + [""]
            for n in job["notes"]:
                lines.append(f"> {prose(n)}")
            if job["notes"]:
                lines.append("")
            lines += table(job["columns"], job["rows"]) + [""]
            lines += [f"### Segments per rank (ms per step, {esc(job['segment_source'])})", ""]
            lines += table(job["segment_columns"], job["segment_rows"], first_col_header=True) + [""]
            if job["comm_rows"]:
                lines += ["### Collectives per rank", ""]
                lines += table(job["comm_columns"], job["comm_rows"]) + [""]
        for sw in report.sweeps:
            lines += [f"## Sweep: {esc(sw['label'])}", ""]
            if sw["command"]:
                lines += [code(" ".join(map(str, sw["command"]))), ""]
            lines += [f"**{esc(sw['knee'])}**", ""]
            lines += table(sw["columns"], sw["rows"])
            lines.append("")
        if report.figures:
            lines += ["## Plots", ""]
            for fig in report.figures:
                lines += [f"### {esc(fig.title)}", "", f"![{esc(fig.title)}]({fig.name})", "", prose(fig.caption), ""]
        lines += ["## Findings", ""]
        if report.findings_rows:
            lines += [f"{len(report.findings_rows)} costliest of {report.findings_total}.", ""]
            cols = report.findings_columns
            rows = [[*row[:-1], row[-1]] for row in report.findings_rows]
            out = table(cols[:-1], [r[:-1] for r in rows])
            # the source line goes in a code cell of its own
            out[0] = out[0] + " code |"
            out[1] = out[1] + "---|"
            for i, r in enumerate(rows):
                out[2 + i] = out[2 + i] + f" {code(r[-1], cell=True)} |"
            lines += out
        else:
            lines.append("No findings recorded.")
        lines.append("")
        for wi in report.what_if:
            lines += [f"## What if: {esc(wi['label'])}", "", prose(wi["summary"]), ""]
            lines += table(wi["columns"], wi["rows"])
            lines.append("")
            lines += [f"* {prose(n)}" for n in wi["notes"]]
            lines.append("")
        return "\n".join(lines)
