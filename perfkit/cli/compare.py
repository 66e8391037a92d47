"""``perfkit compare``: per-metric deltas between two runs; the CI gate with ``--fail-on-regression``."""

from __future__ import annotations

import json

import click

from perfkit.cli.report import BadInput


def _threshold(ctx, param, value):
    if value is None:
        return None
    from perfkit.analysis.diff import parse_threshold

    try:
        return parse_threshold(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command()
@click.argument("base_path", metavar="BASE")
@click.argument("new_path", metavar="NEW")
@click.option("--fail-on-regression", "fail_threshold", default=None, callback=_threshold, metavar="PCT",
              help="Exit 1 when a metric regresses by more than PCT (e.g. 5%) or NEW has a new finding.")
@click.option("--threshold", "show_threshold", default="5%", show_default=True, callback=_threshold, metavar="PCT",
              help="Threshold for the verdict column when --fail-on-regression is not given.")
@click.option("--min-abs-ms", default=0.01, show_default=True, type=click.FloatRange(min=0),
              help="Time deltas smaller than this never count as regressions (noise floor).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def compare(base_path, new_path, fail_threshold, show_threshold, min_abs_ms, fmt):
    """Compare two run records (BASE, NEW): SPS, step times, per-segment time, syncs/step,
    allocs/step, memory, and findings that are new in NEW.

    Exit status: 0 no regression (or no --fail-on-regression), 1 regression, 2 bad input.
    """
    from perfkit.analysis.diff import diff_runs
    from perfkit.record import RecordError, Run

    try:
        base = Run.load(base_path)
        new = Run.load(new_path)
    except RecordError as e:
        raise BadInput(str(e)) from None
    threshold = fail_threshold if fail_threshold is not None else show_threshold
    d = diff_runs(base, new, threshold=threshold, min_abs_ms=min_abs_ms, base_label=base_path, new_label=new_path)
    if fmt == "json":
        click.echo(json.dumps(d.to_dict(), indent=1, default=str))
    elif fmt == "markdown":
        click.echo(render_markdown(d))
    else:
        render_text(d)
    if fail_threshold is not None and d.regressed:
        raise click.exceptions.Exit(1)


def _cells(m):
    from perfkit.analysis.diff import _fmt, _pct

    return [m.metric, _fmt(m.base), _fmt(m.new), _fmt(m.delta) if m.delta is not None else "-", _pct(m.delta_pct),
            f"{m.better} is better", m.verdict]


def render_text(d) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 140)
    t = Table(title=f"{escape(d.base_label)} -> {escape(d.new_label)} (threshold {d.threshold:.1%})", title_justify="left")
    for c in ("metric", "base", "new", "delta", "delta %", "", "verdict"):
        t.add_column(c, justify="left" if c in ("metric", "", "verdict") else "right")
    for m in d.metrics:
        cells = [escape(c) for c in _cells(m)]
        style = "red" if m.regression else ("green" if m.improvement else None)
        t.add_row(*cells, style=style)
    console.print(t)
    for f in d.new_findings:
        console.print(f"[red]new finding[/red]: {escape(f.kind)} {escape(f.op)} at {escape(f.site)} "
                      f"({f.per_step:g}/step, segment {escape(f.segment)})")
    for f in d.resolved_findings:
        console.print(f"[green]resolved[/green]: {escape(f.kind)} {escape(f.op)} at {escape(f.site)}")
    for n in d.notes:
        console.print(f"note: {escape(n)}")
    if d.regressed:
        console.print(f"[bold red]{len(d.regressions)} regression(s)[/bold red]")
        for r in d.regressions:
            console.print(f"  - {escape(r)}")
    else:
        console.print("[bold green]no regression[/bold green]")


def render_markdown(d) -> str:
    from perfkit.renderers.markdown import code, esc

    lines = [f"### perfkit compare: {code(d.base_label)} -> {code(d.new_label)} (threshold {d.threshold:.1%})", "",
             "| metric | base | new | delta | delta % | | verdict |", "|---|---:|---:|---:|---:|---|---|"]
    for m in d.metrics:
        cells = [esc(c) for c in _cells(m)]
        if m.regression:
            cells[-1] = "**REGRESSION**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for f in d.new_findings:
        lines.append(f"* new finding: {esc(f.kind)} {code(f.op)} at {code(f.site)} ({f.per_step:g}/step)")
    for f in d.resolved_findings:
        lines.append(f"* resolved: {esc(f.kind)} {code(f.op)} at {code(f.site)}")
    for n in d.notes:
        lines.append(f"* note: {esc(n)}")
    lines.append("")
    lines.append(f"**{len(d.regressions)} regression(s)**" if d.regressed else "**no regression**")
    return "\n".join(lines)
