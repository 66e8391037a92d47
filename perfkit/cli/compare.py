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


def _records(arg: str) -> list[str]:
    """One side of the comparison: a record's path, or a (quoted) glob pattern matching several."""
    import glob
    import os

    if os.path.exists(arg) or not glob.has_magic(arg):
        return [arg]
    paths = sorted(glob.glob(arg))
    if not paths:
        raise BadInput(f"no record matches {arg!r}")
    return paths


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="BASE NEW")
@click.option("--fail-on-regression", "fail_threshold", default=None, callback=_threshold, metavar="PCT",
              help="Exit 1 on a regression past PCT (e.g. 5%): a count per step or per site that grew, a new "
                   "finding, a crashed NEW run, or (3+ runs a side) SPS or step p25/p50 worse beyond the runs' spread.")
@click.option("--threshold", "show_threshold", default="5%", show_default=True, callback=_threshold, metavar="PCT",
              help="Threshold for the verdict column when --fail-on-regression is not given.")
@click.option("--min-abs-ms", default=0.01, show_default=True, type=click.FloatRange(min=0),
              help="Time deltas smaller than this never count as regressions (noise floor).")
@click.option("--strict", is_flag=True,
              help="With fewer than 3 runs a side, gate SPS and step p25/p50 on the threshold alone (noise can fail it).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def compare(paths, fail_threshold, show_threshold, min_abs_ms, strict, fmt):
    """Compare run records, BASE then NEW: SPS, step times, per-segment time, syncs, allocations and
    per-env loop iterations per step (in total and per site), memory, and findings new in NEW.

    BASE and NEW are each a record or a quoted glob of repeated runs of one version
    ('runs/base-*.json' 'runs/new-*.json'). Counts are deterministic and gated on any run; time
    metrics are tested between runs (each run's value one observation; 3+ runs a side): SPS and the
    step time's p25/p50 gate, p99 and segments are shown; with fewer runs nothing timed gates
    (--strict: the threshold alone). A NEW run that crashed fails the gate. Two sweeps (directories
    or sweep.json) are compared point by point.

    Exit status: 0 no regression (or no --fail-on-regression), 1 regression, 2 bad input.
    """
    from perfkit.cli.requires import require

    require("compare", "numpy", *(("rich",) if fmt == "text" else ()), extra="report")
    from perfkit.analysis.diff import diff_groups
    from perfkit.record import RecordError, Run
    from perfkit.sweeps.record import is_sweep_path

    if len(paths) != 2:
        raise BadInput(f"compare takes two arguments, BASE and NEW, got {len(paths)}: to compare several runs a "
                       "side, quote each side's glob so the shell does not expand it ('base-*.json' 'new-*.json')")
    base_path, new_path = paths
    threshold = fail_threshold if fail_threshold is not None else show_threshold
    sweeps = [is_sweep_path(p) for p in (base_path, new_path)]
    if any(sweeps):
        if not all(sweeps):
            raise BadInput(f"cannot compare a sweep with a single run: {base_path} is a "
                           f"{'sweep' if sweeps[0] else 'run'}, {new_path} is a {'sweep' if sweeps[1] else 'run'}")
        return _compare_sweeps(base_path, new_path, threshold, fail_threshold is not None, fmt)
    sides = [_records(base_path), _records(new_path)]
    try:
        bases, news = ([Run.load(p) for p in side] for side in sides)
    except RecordError as e:
        raise BadInput(str(e)) from None
    d = diff_groups(bases, news, threshold=threshold, min_abs_ms=min_abs_ms, base_label=base_path, new_label=new_path,
                    strict=strict, run_labels=(sides[0], sides[1]))
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
    from perfkit.sweeps.record import load_sweep

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
    """The interval column: the 95 % interval of the change column's own quantity (a time metric tested
    between runs), why there is none, or (sweeps) the step-time ratio with its interval."""
    if m.runs is not None:
        return f"{m.runs.lo:+.1%} .. {m.runs.hi:+.1%}"
    if m.evidence is not None:
        e = m.evidence
        return f"x{e.ratio:.3f} [{e.lo:.3f}, {e.hi:.3f}]"
    if m.untestable:
        return "untested (< 3 runs)"
    if m.metric.endswith("_per_step") and m.base is not None:
        return "count"
    return ""


SPREAD_HEADER = "delta % [95% CI]"
SPREAD_NOTE = (f"{SPREAD_HEADER}: the interval of the delta % column, between runs (each run's value one "
               "observation, Welch); SPS and step p25/p50 regress only when the whole interval is on the worse side "
               "(p99 and segments are shown, not gated). Counts (syncs, allocs, loop iterations per step) are "
               "deterministic and gated on the threshold.")


def _cells(m):
    from perfkit.analysis.diff import _fmt, _pct

    return [m.metric, _fmt(m.base), _fmt(m.new), _fmt(m.delta) if m.delta is not None else "-", _pct(m.delta_pct),
            f"{m.better} is better", _spread(m), m.verdict]


def _runs(d) -> str:
    return f"{d.n_base} vs {d.n_new} run{'s' if d.n_new > 1 else ''}"


def render_text(d) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if Console().is_terminal else 140)
    t = Table(title=f"{escape(d.base_label)} -> {escape(d.new_label)} ({_runs(d)}, threshold {d.threshold:.1%})",
              title_justify="left")
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
    for c in d.site_changes:
        console.print(f"[red]more per step[/red]: {escape(c.finding.kind)} {escape(c.finding.op)} at "
                      f"{escape(c.finding.site)} ({c.base:g} -> {c.new:g}/step)")
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

    lines = [f"### perfkit compare: {code(d.base_label)} -> {code(d.new_label)} ({_runs(d)}, threshold {d.threshold:.1%})",
             "",
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
    for c in d.site_changes:
        lines.append(f"* more per step: {esc(c.finding.kind)} {code(c.finding.op)} at {code(c.finding.site)} "
                     f"({c.base:g} -> {c.new:g}/step)")
    for f in d.resolved_findings:
        lines.append(f"* resolved: {esc(f.kind)} {code(f.op)} at {code(f.site)}")
    for n in d.notes:
        lines.append(f"* note: {esc(n)}")
    lines.append("")
    lines.append(f"**{len(d.regressions)} regression(s)**" if d.regressed else "**no regression**")
    return "\n".join(lines)
