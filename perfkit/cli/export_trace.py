"""``perfkit export-trace``: a run's segment timeline as Chrome/Perfetto trace JSON."""

from __future__ import annotations

import click

from perfkit.cli.errors import BadInput


@click.command("export-trace")
@click.argument("run_path", metavar="RUN")
@click.option("-o", "--out", "out_path", default="trace.json", show_default=True, type=click.Path(dir_okay=False),
              help="Trace file; open it in https://ui.perfetto.dev or chrome://tracing.")
def export_trace(run_path, out_path):
    """Write RUN's timeline (segments per step, CPU and GPU tracks) as a Chrome/Perfetto trace.

    Runs recorded without a timeline get one span per steady-state step from their step times.
    """
    from perfkit.record import RecordError, Run
    from perfkit.renderers.perfetto import TraceError, write_trace

    try:
        run = Run.load(run_path)
        path, n = write_trace(run, out_path)
    except (RecordError, TraceError) as e:
        raise BadInput(str(e)) from None
    click.echo(f"wrote {path} ({n} events)")
