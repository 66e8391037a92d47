"""``perfkit sweep``: measure throughput at several env counts, each in a fresh subprocess."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from perfkit.sweeps.runner import DEFAULT_TIMEOUT_S


def _threshold(ctx, param, value):
    from perfkit.analysis.diff import parse_threshold

    try:
        return parse_threshold(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


class SweepCommand(click.Command):
    """Options anywhere before ``--``; an unknown one is click's "No such option ... Did you mean",
    reminding that a script target's own arguments go after ``--``."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            raise click.UsageError(f"{e.format_message()} (a script target's own arguments go after `--`)",
                                   ctx=e.ctx) from None


@click.command(cls=SweepCommand)
@click.argument("target")
@click.option("--num-envs", "num_envs_spec", default="256..32768", show_default=True,
              help="Env counts: START..END doubles (START..ENDxF grows by F), or a list A,B,C.")
@click.option("-o", "--out", "out_dir", default="runs/sweep", show_default=True, metavar="DIR",
              help="Output directory: sweep.json, sweep.csv, points/<N>.json.")
@click.option("--env-kwarg", "env_kwargs", multiple=True, metavar="NAME=VALUE",
              help="Extra keyword argument for the factory (repeatable); VALUE is parsed as JSON when it can be.")
@click.option("--num-envs-arg", default=None, metavar="FLAG",
              help="Script targets: the flag that takes the env count (e.g. --num-envs).")
@click.option("--steps", default=200, show_default=True, type=click.IntRange(min=1, max=100_000), help="Steady-state steps per point (factory targets; a script runs as long as it runs).")
@click.option("--warmup-steps", default=20, show_default=True, type=click.IntRange(min=0),
              help="Warm-up steps (compilation, graph capture), timed apart; scripts: perfkit profile --warmup-steps.")
@click.option("--max-seconds", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Stop a point's steady state early after this many seconds (at least 10 steps; factory targets).")
@click.option("--actions", type=click.Choice(["random", "zero"]), default="random", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--gpus", default=None, metavar="IDS",
              help="Run points in parallel, one at a time per GPU: CUDA_VISIBLE_DEVICES values such as 0,1.")
@click.option("--timeout", "timeout_s", default=DEFAULT_TIMEOUT_S, show_default=True, type=click.FloatRange(min=0),
              help="Seconds before a point is abandoned (recorded as a timeout); 0: no limit.")
@click.option("--budget", "budget_s", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Seconds for the whole sweep: no point starts after that; the rest are recorded as skipped.")
@click.option("--session-steps", default=0, show_default=True, type=click.IntRange(min=0),
              help="Extra instrumented steps per point under perfkit's session, for segments and findings "
                   "(after the timed steady state, never part of the SPS).")
@click.option("--knee-threshold", default="10%", show_default=True, callback=_threshold,
              help="The knee is where doubling num_envs gains less than this.")
@click.option("--report", "report_dir", default=None, metavar="DIR",
              help="Also render the report (HTML, Markdown, PNGs) into this directory.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@click.option("--resume", is_flag=True,
              help="Keep the finished points (complete or out of memory) of the sweep already in --out, run the rest.")
@click.option("--overwrite", is_flag=True,
              help="Replace the sweep already in --out (only the files it wrote are removed), or write into a "
                   "folder that holds other files. Without it or --resume such a folder is refused.")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def sweep(ctx, target, num_envs_spec, out_dir, env_kwargs, num_envs_arg, steps, warmup_steps, max_seconds, actions, seed,
          gpus, timeout_s, budget_s, session_steps, knee_threshold, report_dir, progress, resume, overwrite,
          script_args):
    """Measure TARGET's throughput at each env count, each point in a fresh subprocess.

    TARGET is an env factory MODULE:CALLABLE, called with num_envs=N (e.g. perfkit.envs:make_env
    with --env-kwarg name=humanoid), or a script path run under `perfkit profile` with
    --num-envs-arg naming its env-count flag (the script's own arguments go after `--`).
    Writes sweep.json, sweep.csv and points/<N>.json into --out and prints the saturation knee.
    Ctrl-C exits 130 keeping what finished; --resume then runs only the rest.
    """
    from perfkit.cli.errors import BadInput
    from perfkit.cli.requires import require

    require("sweep", "torch", "numpy", "pandas", "rich", *(("tqdm",) if progress else ()))
    from perfkit.outputs import describe_error
    from perfkit.sweeps.runner import (SweepConfig, SweepError, SweepInterrupted, is_script_target, parse_env_kwargs,
                               parse_num_envs, run_sweep)

    try:
        num_envs = parse_num_envs(num_envs_spec)
        kwargs = parse_env_kwargs(env_kwargs)
        gpu_list = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else None
        if gpus is not None and not gpu_list:
            raise SweepError("--gpus: give device ids such as 0,1")
        if script_args and not is_script_target(target):
            raise SweepError(f"unexpected arguments {' '.join(script_args)!r}: only script targets take extra arguments")
        if env_kwargs and is_script_target(target):
            raise SweepError("--env-kwarg applies to factory targets; pass script arguments after `--`")
        if is_script_target(target):
            given = [f"--{name.replace('_', '-')}" for name in FACTORY_ONLY
                     if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
            if given:
                raise SweepError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to factory targets "
                                 "(a script runs its own loop; pass its arguments after `--`)")
        cfg = SweepConfig(
            target=target, num_envs=num_envs, out_dir=out_dir, steps=steps, warmup_steps=warmup_steps,
            actions=actions, seed=seed, env_kwargs=kwargs, num_envs_arg=num_envs_arg,
            script_args=list(script_args), gpus=gpu_list, timeout_s=timeout_s or None, max_seconds=max_seconds,
            session_steps=session_steps, knee_threshold=knee_threshold, budget_s=budget_s, resume=resume,
            overwrite=overwrite,
        )
        cfg.command = canonical_command(cfg, num_envs_spec)
        cfg.validate()
    except SweepError as e:
        raise click.UsageError(str(e)) from None
    try:
        cfg.check_out_dir()  # an earlier sweep, or the user's own files, are never silently replaced
        cfg.check_target()  # before the first point: nothing of the target runs
    except SweepError as e:
        raise BadInput(str(e)) from None
    from perfkit.cli.paths import check_output

    script = [cfg.target] if is_script_target(cfg.target) else []
    check_output(Path(out_dir) / "sweep.json", out_dir, script)
    if report_dir:
        check_output(Path(report_dir) / "index.html", report_dir, script, what="--report")

    try:
        result = run_sweep(cfg, progress=progress)
    except SweepInterrupted as e:
        _print_summary(e.sweep)
        done = sum(p.status != "pending" for p in e.sweep.points)
        cmd = list(cfg.command)
        at = cmd.index("--") if "--" in cmd else len(cmd)  # the script's own arguments stay last
        click.echo(f"interrupted: {done} of {len(e.sweep.points)} points finished, kept in {out_dir}; the rest with:\n"
                   f"  {shlex.join([*cmd[:at], '--resume', *cmd[at:]])}", err=True)
        ctx.exit(130)
        return
    except SweepError as e:
        raise BadInput(str(e)) from None
    except OSError as e:
        raise BadInput(describe_error(getattr(e, "filename", None) or out_dir, e)) from None
    _print_summary(result)
    if report_dir:
        from perfkit.analysis.report_model import build_report
        from perfkit.renderers import write_report

        try:
            paths = write_report(build_report([result]), report_dir)
        except OSError as e:
            raise BadInput(describe_error(getattr(e, "filename", None) or report_dir, e)) from None
        click.echo(f"report: {paths['html']}")
    if not result.completed():
        raise click.exceptions.Exit(1)


# options that only a factory target's points use (a script target runs its own loop)
FACTORY_ONLY = ("steps", "actions", "seed", "max_seconds", "session_steps")


def canonical_command(cfg, num_envs_spec: str) -> list[str]:
    """The command that reproduces this sweep (recorded in sweep.json): every option that applies to
    the target spelled out, and those left at their default only where they change a measurement."""
    import json

    cmd = ["perfkit", "sweep", cfg.target, "--num-envs", num_envs_spec]
    for k, v in cfg.env_kwargs.items():
        cmd += ["--env-kwarg", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
    if cfg.num_envs_arg:
        cmd += ["--num-envs-arg", cfg.num_envs_arg]
    if cfg.kind == "factory":
        cmd += ["--steps", str(cfg.steps), "--warmup-steps", str(cfg.warmup_steps), "--actions", cfg.actions]
        if cfg.seed:
            cmd += ["--seed", str(cfg.seed)]
        if cfg.max_seconds:
            cmd += ["--max-seconds", f"{cfg.max_seconds:g}"]
        if cfg.session_steps:
            cmd += ["--session-steps", str(cfg.session_steps)]
    else:
        cmd += ["--warmup-steps", str(cfg.warmup_steps)]
    if cfg.gpus:
        cmd += ["--gpus", ",".join(cfg.gpus)]
    if cfg.timeout_s != DEFAULT_TIMEOUT_S:
        cmd += ["--timeout", f"{cfg.timeout_s or 0:g}"]
    if cfg.budget_s:
        cmd += ["--budget", f"{cfg.budget_s:g}"]
    if abs(cfg.knee_threshold - 0.10) > 1e-12:
        cmd += ["--knee-threshold", f"{cfg.knee_threshold:.4g}"]
    cmd += ["-o", str(cfg.out_dir)]
    if cfg.script_args:
        cmd += ["--", *cfg.script_args]
    return cmd


def _print_summary(result) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from perfkit.sweeps.record import physics_sps

    table = Table(title=f"sweep {escape(result.label)}", title_justify="left")
    for col in ("num_envs", "status", "env SPS", "physics SPS", "p50 ms", "p99 ms", "warm-up s", "memory"):
        table.add_column(col, justify="right" if col != "status" else "left")
    for p in result.points:
        r = result.runs.get(p.num_envs)
        ok = p.status == "complete" and r is not None
        mem = r.peak_memory()[0] if r is not None else None
        table.add_row(
            str(p.num_envs), p.status if ok else f"[red]{escape(p.status)}[/red]",
            f"{r.sps:,.0f}" if ok else "-",
            f"{physics_sps(r):,.0f}" if ok and physics_sps(r) else "-",
            f"{r.step_ms.get('p50', 0):.3f}" if ok else "-",
            f"{r.step_ms.get('p99', 0):.3f}" if ok else "-",
            f"{r.warmup_s:.2f}" if r is not None and r.warmup_s else "-",
            f"{mem / 2**20:,.0f} MiB" if mem else "-",
        )
    console = Console(width=None if Console().is_terminal else 140)
    console.print(table, markup=True)
    for p in result.points:  # why each failed point failed, and where its whole log is
        if p.status not in ("complete", "pending"):
            console.print(f"n={p.num_envs} {p.status}: {p.error or 'no reason recorded'}"
                          + (f" (log: {result.dir / p.log})" if p.log else ""), markup=False, soft_wrap=True)
    console.print(result.describe_knee(), markup=False)
    console.print(f"wrote {result.dir}/sweep.json, sweep.csv, points/", markup=False)
