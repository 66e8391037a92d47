"""``perfkit export-trace``: a run's segment timeline as Chrome/Perfetto trace JSON."""

from __future__ import annotations

import click

from perfkit.cli.errors import BadInput


def _steps(ctx, param, value):
    if value is None:
        return None
    from perfkit.renderers.perfetto import parse_steps

    try:
        return parse_steps(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command("export-trace")
@click.argument("run_path", metavar="RUN")
@click.option("-o", "--out", "out_path", default="trace.json", show_default=True, metavar="PATH",
              help="Trace file; open it in https://ui.perfetto.dev or chrome://tracing.")
@click.option("--steps", default=None, callback=_steps, metavar="A:B",
              help="Only steps A <= step < B (A:, :B and N work too). Default: every step the record holds.")
def export_trace(run_path, out_path, steps):
    """Write RUN's timeline (segments per step, CPU and GPU tracks) as a Chrome/Perfetto trace.

    Every step in the record's timeline is exported (or the --steps range). Runs recorded without a
    timeline get one span per steady-state step from their step times.
    """
    from perfkit.cli.paths import check_output
    from perfkit.outputs import describe_error
    from perfkit.record import RecordError, Run
    from perfkit.renderers.perfetto import TraceError, write_trace

    check_output(out_path, inputs=[run_path])
    try:
        run = Run.load(run_path)
        path, n, covered = write_trace(run, out_path, steps)
    except (RecordError, TraceError) as e:
        raise BadInput(str(e)) from None
    except OSError as e:
        raise BadInput(describe_error(out_path, e)) from None
    what = f"steps {covered[0]}..{covered[-1]}" if covered else "no steps"
    click.echo(f"wrote {path} ({n} events): {what}")
