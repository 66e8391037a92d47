"""``perfkit report``: HTML + Markdown + PNG throughput report from run records and sweeps."""

from __future__ import annotations

import click

from perfkit.cli.errors import BadInput

DEFAULT_TITLE = "perfkit throughput report"


@click.command()
@click.argument("inputs", nargs=-1, required=True, metavar="RUN_OR_SWEEP...")
@click.option("-o", "--out", "out_dir", default="reports/latest", show_default=True, type=click.Path(file_okay=False),
              help="Directory for index.html, report.md and the PNG plots.")
@click.option("--title", default=DEFAULT_TITLE, show_default=True)
def report(inputs, out_dir, title):
    """Render a report from run records (perfkit.run/1) and sweeps (a sweep directory or its sweep.json).

    Several inputs are shown side by side, e.g. `perfkit report runs/train.json runs/train_naive.json`.
    """
    from perfkit.record import RecordError
    from perfkit.analysis.report_model import build_report, load_inputs
    from perfkit.renderers import write_report

    try:
        items = load_inputs(inputs)
    except RecordError as e:
        raise BadInput(str(e)) from None
    command = ["perfkit", "report", *inputs, "-o", out_dir]
    if title != DEFAULT_TITLE:
        command += ["--title", title]
    rep = build_report(items, title=title, command=command)
    paths = write_report(rep, out_dir)
    click.echo(f"wrote {paths['html']}")
    click.echo(f"wrote {paths['md']}")
    for p in paths["png"]:
        click.echo(f"wrote {p}")
