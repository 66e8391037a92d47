"""``perfkit profile``: run a training script unchanged under instrumentation."""

from __future__ import annotations

import click

from perfkit.cli.errors import BadInput
from perfkit.cli.program_args import ProgramCommand
from perfkit.collectors.sync_gate import RECHECK
from perfkit.config import SYNC_COUNTING


@click.command(
    "profile",
    cls=ProgramCommand,  # options end where the script starts; a misspelled one is click's "No such option"
    context_settings=dict(allow_interspersed_args=False, help_option_names=["-h", "--help"]),
)
@click.option("-o", "--output", "output", default="runs/latest.json", show_default=True, metavar="PATH",
              help="Where to write the run record (perfkit.run/3 JSON); relative to the directory perfkit was started in. "
                   "Under torchrun (WORLD_SIZE > 1) rank R writes PATH with .rankR before its suffix "
                   "(run.json -> run.rankR.json; a directory -> DIR/run.rankR.json).")
@click.option("--max-syncs-per-step", type=click.FloatRange(min=0), default=None,
              help="Exit with status 2 when the steady-state syncs per step exceed N.")
@click.option("--max-allocs-per-step", type=click.FloatRange(min=0), default=None,
              help="Exit with status 2 when the allocations per step exceed N.")
@click.option("--verify", is_flag=True, help="GPU: count the CUDA runtime's own syncs (torch.profiler/CUPTI) and report unattributed ones.")
@click.option("--sync-counting", type=click.Choice(SYNC_COUNTING), default=None,
              help="Count syncs on every steady step, or on whole periods of the loop once a few agree (one in "
                   f"about every {RECHECK}; the default on CUDA, except with --verify). Default: [tool.perfkit] "
                   "sync_counting, else auto.")
@click.option("--step-fn", default=None, metavar="MOD:CLASS.METHOD", help="What one env step is (default: auto-detected).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Steps kept apart from steady state (default 5).")
@click.option("--num-envs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Envs one step advances, when the stepped object has no num_envs: throughput is then "
                   "env-steps/s, and per-env loops are found (without it: steps/s).")
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module (like python -m) instead of a script.")
@click.option("-q", "--quiet", is_flag=True, help="No console summary.")
@click.argument("target_and_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx, output, max_syncs_per_step, max_allocs_per_step, verify, sync_counting, step_fn, warmup_steps, num_envs, module, quiet,
            target_and_args):
    """Run SCRIPT [ARGS...] (or -m MODULE [ARGS...]) in-process and profile it.

    Syncs, allocations, per-env Python loops and stream hazards are attributed to their lines and
    segments; the summary goes to stderr, the run record to -o (checked writable before the script
    starts; written even when the script crashes, is interrupted or calls os._exit). The script's
    exit status passes through; a budget overrun exits 2.
    """
    from perfkit.cli.requires import require

    args = list(target_and_args)
    if module is None:
        if not args:
            raise click.UsageError("give a script to run (perfkit profile [options] script.py [args...]) or -m module")
        target, args = args[0], args[1:]
    else:
        target = module
    require("profile", "torch", "numpy", *(() if quiet else ("rich",)))

    from perfkit import config as config_mod
    from perfkit.outputs import resolve
    from perfkit.profile.runner import TargetError, run

    try:
        cfg = config_mod.load()
    except config_mod.ConfigError as e:
        raise click.UsageError(str(e)) from None
    if step_fn is not None and ":" not in step_fn:
        raise click.BadParameter("must look like module:Class.method", param_hint="--step-fn")
    # the record goes where the user pointed from here, whatever directory the program moves to
    from perfkit.dist import launch_info, rank_record_path

    launch = launch_info()
    if launch["world_size"] > 1:  # one process per rank (torchrun): each writes its own record
        output = str(rank_record_path(output, launch["rank"]))
    out_path = resolve(output)
    from perfkit.cli.paths import check_output, program_inputs

    check_output(out_path, output, program_inputs(target, args, module is not None), note=" (the script was not run)")
    max_syncs = max_syncs_per_step if max_syncs_per_step is not None else cfg.max_syncs_per_step
    max_allocs = max_allocs_per_step if max_allocs_per_step is not None else cfg.max_allocs_per_step
    if sync_counting is not None:
        from dataclasses import replace

        cfg = replace(cfg, sync_counting=sync_counting)
    kwargs = dict(config=cfg, verify=verify)
    if step_fn:
        kwargs["step_fn"] = step_fn
    if warmup_steps is not None:
        kwargs["warmup_steps"] = warmup_steps
    if num_envs is not None:
        kwargs["num_envs"] = num_envs

    def finish(outcome) -> int:
        return _finish(outcome, output, out_path, max_syncs, max_allocs, quiet)

    try:
        outcome = run(target, args, module=module is not None, session_kwargs=kwargs, on_exit=finish)
    except TargetError as e:
        raise BadInput(str(e)) from None
    except ValueError as e:  # a bad --step-fn found when the session starts
        raise BadInput(str(e)) from None
    ctx.exit(outcome.exit_code)  # finish() ran inside run(), with SIGTERM held off until the record was written


def _finish(outcome, output: str, out_path, max_syncs, max_allocs, quiet: bool) -> int:
    """Gate, write and summarize a finished run; the exit code. Also what ``os._exit`` runs first."""
    import os
    import sys
    import tempfile

    from perfkit.analysis.budgets import check_run
    from perfkit.outputs import describe_error
    from perfkit.record import EXTRA_BUDGET

    sys.stdout.flush()
    code = outcome.exit_code
    rec = outcome.run
    output, out_path, rank, world = _rank_output(rec, output, out_path)
    problems = check_run(rec, max_syncs, max_allocs)
    if problems:
        rec.extra[EXTRA_BUDGET] = {"max_syncs_per_step": max_syncs, "max_allocs_per_step": max_allocs,
                                   "exceeded": problems}
    try:
        rec.save(out_path)
    except OSError as e:
        # the run happened: never lose its record over the output path
        kept = os.path.join(tempfile.gettempdir(), f"perfkit-run-{os.getpid()}.json")
        try:
            rec.save(kept)
            where = f"; the record was written to {kept} instead"
        except OSError:
            where = ""
        click.echo(f"Error: {describe_error(output, e)}{where}", err=True)
        return 2
    failed_rank = world > 1 and (rec.status != "complete" or code != 0)
    if not quiet and rank == 0 and not failed_rank:  # a failing rank's stderr stays torchrun's, plus one line
        from perfkit.renderers.console import ConsoleRenderer

        sys.stderr.write(ConsoleRenderer(terminal=sys.stderr).render(rec))
        if world == 1:
            click.echo(f"run record: {output}", err=True)
        else:
            click.echo(f"perfkit: {world} ranks: each writes its own record ({output} here); rank 0 prints the "
                       "summary, every rank one line; merge them with perfkit report", err=True)
    if not quiet and world > 1:
        from perfkit.analysis.ranks import rank_line

        click.echo(rank_line(rec, output), err=True)
    if problems:
        click.echo("perfkit profile: budget exceeded\n" + "\n".join(rec.extra[EXTRA_BUDGET]["exceeded"]), err=True)
        if code == 0:
            code = 2
    return code


def _rank_output(rec, output: str, out_path):
    """``(output, path, rank, world size)`` of a finished run: a rank of a job whose launcher did not
    say so in the environment (its process group did) still gets its own record name."""
    from perfkit.analysis.ranks import rank_of, world_of
    from perfkit.dist import launch_info, rank_record_path

    rank, world = rank_of(rec), world_of(rec)
    if world > 1 and launch_info()["world_size"] == 1:
        out_path = rank_record_path(out_path, rank)  # absolute: the program may have changed directory
        output = str(rank_record_path(output, rank))
    return output, out_path, rank, world
