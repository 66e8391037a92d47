"""``perfkit report``: HTML + Markdown + PNG throughput report from run records and sweeps."""

from __future__ import annotations

from pathlib import Path

import click

from perfkit.cli.errors import BadInput
from perfkit.record import READABLE_SCHEMAS, SCHEMA

DEFAULT_TITLE = "perfkit throughput report"


_OLDER = ", ".join(s for s in READABLE_SCHEMAS if s != SCHEMA)


@click.command(help=f"""Render a report from run records ({SCHEMA}; older ones read too: {_OLDER}) and sweeps
    (a sweep directory or its sweep.json).

    Several inputs are shown side by side, e.g. `perfkit report runs/train.json runs/train_naive.json`.
    """)
@click.argument("inputs", nargs=-1, required=True, metavar="RUN_OR_SWEEP...")
@click.option("-o", "--out", "out_dir", default="runs/report", show_default=True, metavar="DIR",
              help="Directory for index.html, report.md and the PNG plots.")
@click.option("--title", default=DEFAULT_TITLE, show_default=True)
@click.option("--single", default=None, metavar="RUN",
              help="The 1-GPU run of a data-parallel job's script, for its scaling efficiency (default: the one "
                   "input of a world of 1 that ran the same script under a process group).")
def report(inputs, out_dir, title, single):
    # the help is above: it names the record schemas this perfkit reads
    from perfkit.cli.requires import require

    require("report", "matplotlib", "jinja2", "numpy")
    from perfkit.analysis.report_model import build_report, load_inputs
    from perfkit.cli.paths import check_output
    from perfkit.outputs import describe_error
    from perfkit.record import RecordError
    from perfkit.renderers import write_report

    try:
        items = load_inputs(inputs)
        base = None
        if single is not None:
            base = next((it for it in items if it.source == single), None)
            if base is None:
                base = load_inputs([single])[0]
                items.append(base)
            if base.run is None:
                raise BadInput(f"--single {single}: a sweep, not a run record")
            from perfkit.analysis.ranks import rank_of, world_of

            if world_of(base.run) != 1:
                raise BadInput(f"--single {single}: rank {rank_of(base.run)} of a world of {world_of(base.run)}, not a "
                               "1-GPU run (give the record of the script run on one GPU: torchrun --nproc-per-node 1)")
    except RecordError as e:
        raise BadInput(str(e)) from None
    command = ["perfkit", "report", *inputs, "-o", out_dir]
    if single is not None:
        command += ["--single", single]
    if title != DEFAULT_TITLE:
        command += ["--title", title]
    rep = build_report(items, title=title, command=command, single=base)
    read = [path for it in items for path in _files_read(it)]
    for name in ("index.html", "report.md", *(f.name for f in rep.figures)):  # never over a file it read
        check_output(Path(out_dir) / name, str(Path(out_dir) / name), read)
    try:
        paths = write_report(rep, out_dir)
    except OSError as e:
        raise BadInput(describe_error(getattr(e, "filename", None) or out_dir, e)) from None
    click.echo(f"wrote {paths['html']}")
    click.echo(f"wrote {paths['md']}")
    for p in paths["png"]:
        click.echo(f"wrote {p}")


def _files_read(item) -> list[Path]:
    """The files a report input was read from: a record, or a sweep's manifest, table and points."""
    if item.sweep is None:
        return [Path(item.source)] if item.source else []
    from perfkit.sweeps.record import CSV, MANIFEST

    sw = item.sweep
    return [sw.dir / MANIFEST, sw.dir / CSV, *(sw.dir / f for p in sw.points for f in (p.record, p.log) if f)]
