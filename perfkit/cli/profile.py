"""``perfkit profile``: run a training script unchanged under instrumentation."""

from __future__ import annotations

import click


@click.command(
    "profile",
    context_settings=dict(ignore_unknown_options=True, allow_interspersed_args=False, help_option_names=["-h", "--help"]),
)
@click.option("-o", "--output", "output", default="runs/latest.json", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the run record (perfkit.run/1 JSON).")
@click.option("--max-syncs-per-step", type=click.FloatRange(min=0), default=None,
              help="Exit with status 2 when the steady-state syncs per step exceed N.")
@click.option("--max-allocs-per-step", type=click.FloatRange(min=0), default=None,
              help="Exit with status 2 when the allocations per step exceed N.")
@click.option("--verify", is_flag=True, help="GPU: count the CUDA runtime's own syncs (torch.profiler/CUPTI) and report unattributed ones.")
@click.option("--step-fn", default=None, metavar="MOD:CLASS.METHOD", help="What one env step is (default: auto-detected).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Steps kept apart from steady state (default 5).")
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module (like python -m) instead of a script.")
@click.option("-q", "--quiet", is_flag=True, help="No console summary.")
@click.argument("target_and_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def profile(ctx, output, max_syncs_per_step, max_allocs_per_step, verify, step_fn, warmup_steps, module, quiet, target_and_args):
    """Run SCRIPT [ARGS...] (or -m MODULE [ARGS...]) in-process and profile it.

    Syncs, allocations, per-env Python loops and stream hazards are attributed to their lines and
    segments; the summary goes to stderr, the run record to -o. The script's exit status passes
    through; a budget overrun exits 2.
    """
    import sys

    from perfkit import config as config_mod
    from perfkit.analysis.budgets import check_run
    from perfkit.runner import TargetError, run

    args = list(target_and_args)
    if module is None:
        if not args:
            raise click.UsageError("give a script to run (perfkit profile [options] script.py [args...]) or -m module")
        target, args = args[0], args[1:]
    else:
        target = module
    try:
        cfg = config_mod.load()
    except config_mod.ConfigError as e:
        raise click.UsageError(str(e)) from None
    if step_fn is not None and ":" not in step_fn:
        raise click.BadParameter("must look like module:Class.method", param_hint="--step-fn")
    max_syncs = max_syncs_per_step if max_syncs_per_step is not None else cfg.max_syncs_per_step
    max_allocs = max_allocs_per_step if max_allocs_per_step is not None else cfg.max_allocs_per_step
    kwargs = dict(config=cfg, verify=verify)
    if step_fn:
        kwargs["step_fn"] = step_fn
    if warmup_steps is not None:
        kwargs["warmup_steps"] = warmup_steps
    try:
        outcome = run(target, args, module=module is not None, session_kwargs=kwargs)
    except TargetError as e:
        click.echo(f"perfkit profile: error: {e}", err=True)
        ctx.exit(2)
        return
    except ValueError as e:  # a bad --step-fn found when the session starts
        click.echo(f"perfkit profile: error: {e}", err=True)
        ctx.exit(2)
        return
    sys.stdout.flush()
    code = outcome.exit_code
    rec = outcome.run
    problems = check_run(rec, max_syncs, max_allocs)
    if problems:
        rec.extra["budget"] = {"max_syncs_per_step": max_syncs, "max_allocs_per_step": max_allocs, "exceeded": problems}
    try:
        path = rec.save(output)
    except OSError as e:
        click.echo(f"perfkit profile: error: cannot write the run record to {output}: {e}", err=True)
        ctx.exit(2)
        return
    if not quiet:
        from perfkit.renderers.console import render

        render(rec)
        click.echo(f"run record: {path}", err=True)
    if problems:
        click.echo("perfkit profile: budget exceeded\n" + "\n".join(problems), err=True)
        if code == 0:
            code = 2
    ctx.exit(code)
