"""``report.md``: the same report as Markdown (GitHub-flavoured tables), plots linked beside it.

User-controlled strings are escaped for Markdown *and* for the HTML a Markdown renderer passes
through: ``<script>`` in a path shows as text, a ``|`` in a message does not split a table cell.
"""

from __future__ import annotations

import re
from pathlib import Path

_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")


def esc(text: object) -> str:
    s = str(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s.replace("\r", " ").replace("\n", " ")


def code(text: object) -> str:
    """Inline code that survives any content: HTML-escaped inside <code>, pipes escaped for tables."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;")
    s = s.replace("\r", " ").replace("\n", " ")
    return f"<code>{s}</code>" if s else ""


def table(columns: list[str], rows: list[list[str]], first_col_header: bool = False) -> list[str]:
    out = ["| " + " | ".join(esc(c) for c in columns) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"]
    for row in rows:
        cells = [f"**{esc(v)}**" if (first_col_header and i == 0) else esc(v) for i, v in enumerate(row)]
        out.append("| " + " | ".join(cells) + " |")
    return out


def render(report) -> str:
    from perfkit import __version__

    lines = [f"# {esc(report.title)}", "", f"Generated {esc(report.generated)} by perfkit {esc(__version__)}.", ""]
    if report.command:
        lines += ["```", " ".join(str(c).replace("```", "'''") for c in report.command), "```", ""]
    for n in report.notes:
        lines.append(f"> {esc(n)}")
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
            lines.append(f"> {esc(n)}")
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
            lines += [f"### {esc(fig.title)}", "", f"![{esc(fig.title)}]({fig.name})", "", esc(fig.caption), ""]
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
            out[2 + i] = out[2 + i] + f" {code(r[-1])} |"
        lines += out
    else:
        lines.append("No findings recorded.")
    lines.append("")
    for wi in report.what_if:
        lines += [f"## What if: {esc(wi['label'])}", "", esc(wi["summary"]), ""]
        lines += table(wi["columns"], wi["rows"])
        lines.append("")
        lines += [f"* {esc(n)}" for n in wi["notes"]]
        lines.append("")
    return "\n".join(lines)


def write(report, path: str | Path) -> Path:
    from perfkit.outputs import write_text

    return write_text(path, render(report))
