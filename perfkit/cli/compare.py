"""``perfkit compare``: per-metric deltas between two runs; the CI gate with ``--fail-on-regression``."""

from __future__ import annotations

import json

import click

from perfkit.cli.errors import BadInput


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
    allocs/step, memory, and findings that are new in NEW. Two sweeps (directories or sweep.json)
    are compared point by point: SPS at each num_envs, and points that newly run out of memory.

    Exit status: 0 no regression (or no --fail-on-regression), 1 regression, 2 bad input.
    """
    from perfkit.cli.requires import require

    require("compare", "numpy", *(("rich",) if fmt == "text" else ()), extra="report")
    from perfkit.analysis.diff import diff_runs
    from perfkit.record import RecordError, Run
    from perfkit.sweep_record import is_sweep_path

    threshold = fail_threshold if fail_threshold is not None else show_threshold
    sweeps = [is_sweep_path(p) for p in (base_path, new_path)]
    if any(sweeps):
        if not all(sweeps):
            raise BadInput(f"cannot compare a sweep with a single run: {base_path} is a "
                           f"{'sweep' if sweeps[0] else 'run'}, {new_path} is a {'sweep' if sweeps[1] else 'run'}")
        return _compare_sweeps(base_path, new_path, threshold, fail_threshold is not None, fmt)
    try:
        base = Run.load(base_path)
        new = Run.load(new_path)
    except RecordError as e:
        raise BadInput(str(e)) from None
    d = diff_runs(base, new, threshold=threshold, min_abs_ms=min_abs_ms, base_label=base_path, new_label=new_path)
    if fmt == "json":
        click.echo(json.dumps(d.to_dict(), indent=1, default=str))
    elif fmt == "markdown":
        click.echo(render_markdown(d))
    else:
        render_text(d)
    if fail_threshold is not None and d.regressed:
        raise click.exceptions.Exit(1)


def _compare_sweeps(base_path, new_path, threshold, gate, fmt):
    from perfkit.analysis.diff import _fmt, _pct, diff_sweeps
    from perfkit.record import RecordError
    from perfkit.sweep_record import load_sweep

    try:
        base, new = load_sweep(base_path), load_sweep(new_path)
    except RecordError as e:
        raise BadInput(str(e)) from None

    def side(sw):
        return {p.num_envs: (p.status, sw.runs.get(p.num_envs)) for p in sw.points}

    d = diff_sweeps(side(base), side(new), threshold=threshold, base_label=base_path, new_label=new_path)
    if fmt == "json":
        click.echo(json.dumps(d.to_dict(), indent=1, default=str))
    else:
        rows = [[str(p.num_envs), p.base_status, p.new_status, _fmt(p.sps.base), _fmt(p.sps.new), _pct(p.sps.delta_pct),
                 "REGRESSION" if (p.sps.regression or (p.base_status == "complete" and p.new_status not in ("complete", "missing")))
                 else p.sps.verdict] for p in d.points]
        header = ["num_envs", "base status", "new status", "base SPS", "new SPS", "delta %", "verdict"]
        if fmt == "markdown":
            from perfkit.renderers.markdown import esc

            click.echo(f"### perfkit compare (sweeps): {esc(base_path)} -> {esc(new_path)} (threshold {threshold:.1%})\n")
            click.echo("| " + " | ".join(header) + " |")
            click.echo("|" + "|".join(["---:"] + ["---"] * 2 + ["---:"] * 3 + ["---"]) + "|")
            for r in rows:
                click.echo("| " + " | ".join(esc(c) for c in r) + " |")
        else:
            from rich.console import Console
            from rich.markup import escape
            from rich.table import Table

            t = Table(title=f"{escape(base_path)} -> {escape(new_path)} (threshold {threshold:.1%})", title_justify="left")
            for c in header:
                t.add_column(c, justify="right" if c not in ("base status", "new status", "verdict") else "left")
            for r in rows:
                t.add_row(*[escape(c) for c in r], style="red" if r[-1] == "REGRESSION" else None)
            Console(width=None if Console().is_terminal else 140).print(t)
        click.echo(f"knee: base {d.base_knee or 'none'}, new {d.new_knee or 'none'}")
        for n in d.notes:
            click.echo(f"note: {n}")
        click.echo(f"{len(d.regressions)} regression(s)" if d.regressed else "no regression")
        for r in d.regressions:
            click.echo(f"  - {r}")
    if gate and d.regressed:
        raise click.exceptions.Exit(1)


def _spread(m) -> str:
    """The evidence column: the step-time ratio with its 95 % interval, or the spread a segment is weighed by."""
    if m.evidence is not None:
        e = m.evidence
        return f"x{e.ratio:.3f} [{e.lo:.3f}, {e.hi:.3f}]"
    if m.noise_ms is not None:
        return f"+/-{m.noise_ms:.3g} ms"
    return ""


SPREAD_HEADER = "step-time ratio [95% CI]"
SPREAD_NOTE = (f"{SPREAD_HEADER}: new/base of the per-step times behind the metric (mean for SPS, median for p50, "
               "p99 for p99; stratified bootstrap); a time metric regresses only when the whole interval is on the "
               "slower side. Segments without per-step samples: the spread of the mean step time.")


def _cells(m):
    from perfkit.analysis.diff import _fmt, _pct

    return [m.metric, _fmt(m.base), _fmt(m.new), _fmt(m.delta) if m.delta is not None else "-", _pct(m.delta_pct),
            f"{m.better} is better", _spread(m), m.verdict]


def render_text(d) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 140)
    t = Table(title=f"{escape(d.base_label)} -> {escape(d.new_label)} (threshold {d.threshold:.1%})", title_justify="left")
    for c in ("metric", "base", "new", "delta", "delta %", "", SPREAD_HEADER, "verdict"):
        t.add_column(escape(c), justify="left" if c in ("metric", "", "verdict") else "right")
    for m in d.metrics:
        cells = [escape(c) for c in _cells(m)]
        style = "red" if m.regression else ("green" if m.improvement else None)
        t.add_row(*cells, style=style)
    console.print(t)
    console.print(SPREAD_NOTE, markup=False)
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
             f"| metric | base | new | delta | delta % | | {SPREAD_HEADER} | verdict |",
             "|---|---:|---:|---:|---:|---|---:|---|"]
    for m in d.metrics:
        cells = [esc(c) for c in _cells(m)]
        if m.regression:
            cells[-1] = "**REGRESSION**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", esc(SPREAD_NOTE), ""]
    for f in d.new_findings:
        lines.append(f"* new finding: {esc(f.kind)} {code(f.op)} at {code(f.site)} ({f.per_step:g}/step)")
    for f in d.resolved_findings:
        lines.append(f"* resolved: {esc(f.kind)} {code(f.op)} at {code(f.site)}")
    for n in d.notes:
        lines.append(f"* note: {esc(n)}")
    lines.append("")
    lines.append(f"**{len(d.regressions)} regression(s)**" if d.regressed else "**no regression**")
    return "\n".join(lines)
