"""``perfkit overhead``: what ``perfkit profile`` costs a script, measured on the script itself."""

from __future__ import annotations

import click

from perfkit.cli.errors import BadInput
from perfkit.cli.program_args import ProgramCommand


def _threshold(ctx, param, value):
    if value is None:
        return None
    from perfkit.analysis.diff import parse_threshold

    try:
        v = parse_threshold(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if v >= 1:
        raise click.BadParameter(f"{value!r}: an overhead of 100 % or more gates nothing")
    return v


@click.command(
    "overhead",
    cls=ProgramCommand,  # options end where the script starts; a misspelled one is click's "No such option"
    context_settings=dict(allow_interspersed_args=False, help_option_names=["-h", "--help"]),
)
@click.option("--rounds", type=click.IntRange(min=1), default=5, show_default=True,
              help="Interleaved rounds; each runs every arm once, the order rotating by round.")
@click.option("--arms", default="plain,perfkit,torch-profiler", show_default=True, metavar="LIST",
              help="Which arms run: plain (required), perfkit, torch-profiler.")
@click.option("--metric-regex", default=None, metavar="REGEX",
              help="The metric: the first group of the last stdout line this matches (multi-line mode; higher is "
                   r"better). Default: ^SPS: ([-+0-9.,eE]+)\s*$")
@click.option("--wall-only", is_flag=True,
              help="No metric: compare the runs' wall times (for a script that prints no throughput).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Kill a run (and its children) after this long; it counts as failed. Default: no limit.")
@click.option("--warmup-runs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Untimed plain runs first (compiled kernels, caches warm for every arm).")
@click.option("--profile-args", default="", metavar="'OPTIONS'",
              help="Extra `perfkit profile` options for the perfkit arm, in one shell-quoted string "
                   "(e.g. '--warmup-steps 24').")
@click.option("--logs", "logs", default=None, metavar="DIR",
              help="Keep every run's stdout/stderr (and the perfkit arm's record) in DIR; default: a temporary folder.")
@click.option("--json", "json_path", default=None, metavar="PATH", help="Write the results as JSON (after every round).")
@click.option("--markdown", "md_path", default=None, metavar="PATH", help="Write the results as Markdown (after every round).")
@click.option("--max-overhead", default=None, callback=_threshold, metavar="PCT",
              help="Gate: exit 1 when perfkit's median ratio to plain is below 1 - PCT (3% -> 0.97).")
@click.option("--max-added-wall", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Gate: exit 1 when perfkit adds more than this to a run's median wall time.")
@click.option("--line-times", is_flag=True,
              help="Split each run's wall time at its first and last line of stdout (start, run, end), to see "
                   "where an arm's added wall time goes; runs every arm with PYTHONUNBUFFERED=1.")
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module (like python -m) instead of a script.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines (the table is still printed).")
@click.argument("target_and_args", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [ARGS]...")
@click.pass_context
def overhead(ctx, rounds, arms, metric_regex, wall_only, timeout, warmup_runs, profile_args, logs, json_path, md_path,
             max_overhead, max_added_wall, line_times, module, quiet, target_and_args):
    """Measure what perfkit costs SCRIPT [ARGS...] (or -m MODULE [ARGS...]): run it plainly, under
    `perfkit profile` and under torch.profiler, each run a fresh process, in --rounds interleaved rounds.

    This is how perfkit's own overhead is measured; measure it on your script the same way:

    \b
        perfkit overhead train.py --num-envs 4096
        perfkit overhead --rounds 7 --max-overhead 3% --json overhead.json train.py --num-envs 4096

    The script should print its throughput last as `SPS: <float>`, timed over its steady state (or
    give --metric-regex, or --wall-only). The arms run in the directory you are in, with your
    environment:

    \b
        plain           python SCRIPT ARGS
        perfkit         python -m perfkit profile -q -o RECORD SCRIPT ARGS
        torch-profiler  SCRIPT under torch.profiler.profile(CPU + CUDA, with_stack=True)

    Printed: each round's metric, ratio to plain and wall time per arm; per arm the median metric,
    the median of the per-round ratios (perfkit/plain, torch-profiler/plain), the overhead (1 - that
    median) and the added wall time (median wall minus plain's: start-up, hooks, writing the
    record). A failed run (non-zero exit, timeout, no metric) is listed with the end of its stderr
    and left out of the ratios.

    Exit status: 0; 1 when a run failed or a gate (--max-overhead, --max-added-wall) failed; 2 for
    bad input; 130 on Ctrl-C (what finished is printed and written).
    """
    import shlex

    from perfkit.overhead.measure import DEFAULT_METRIC, Target, measure, table
    from perfkit.outputs import resolve

    target, args = _target_of(list(target_and_args), module)
    regex, arm_list, extra = _checked_options(arms, metric_regex, wall_only, profile_args, max_overhead, max_added_wall)
    _check_target(arm_list, target, module)
    write = _writer(_outputs(json_path, md_path, target, args, module))
    result_name = "SPS" if regex == DEFAULT_METRIC else ("metric" if regex else "")
    partial: dict = {}

    def on_round(result) -> None:
        partial["result"] = result
        write(result)

    if not quiet:
        click.echo(f"perfkit overhead: {len(arm_list)} arms x {rounds} rounds (+{warmup_runs} warm-up) of "
                   f"{shlex.join(([] if module is None else ['-m']) + [target, *args])}", err=True)
    code = 0
    try:
        result = measure(Target(target, args, module=module is not None), arms=arm_list, rounds=rounds, metric_regex=regex,
                         timeout=timeout, warmup_runs=warmup_runs, log_dir=resolve(logs) if logs else None,
                         profile_args=extra, line_times=line_times, on_run=None if quiet else _progress(rounds, result_name),
                         on_round=on_round)
    except KeyboardInterrupt:
        result = partial.get("result")
        click.echo("perfkit overhead: interrupted", err=True)
        if result is None:
            ctx.exit(130)
        code = 130
    except OSError as e:  # --logs not writable, an interpreter that cannot start
        raise BadInput(f"cannot run: {e}") from None
    write(result)
    click.echo(table(result), nl=False)
    if code:
        ctx.exit(code)
    problems = _problems(result, max_overhead, max_added_wall)
    for p in problems:
        click.echo(f"perfkit overhead: {p}", err=True)
    ctx.exit(1 if problems else 0)


def _target_of(args: list[str], module: str | None) -> tuple[str, list[str]]:
    """The script (or module) to run and its arguments."""
    if module is not None:
        return module, args
    if not args:
        raise click.UsageError("give a script to run (perfkit overhead [options] script.py [args...]) or -m module")
    return args[0], args[1:]


def _checked_options(arms, metric_regex, wall_only, profile_args, max_overhead, max_added_wall):
    """``(metric regex or None, arms, extra profile options)``; BadInput for options that cannot work together."""
    import shlex

    from perfkit.overhead.measure import DEFAULT_METRIC, OverheadError, check_arms, compile_metric

    if wall_only and metric_regex is not None:
        raise BadInput("--wall-only and --metric-regex exclude each other")
    regex = None if wall_only else (metric_regex or DEFAULT_METRIC)
    try:
        arm_list = check_arms(arms.split(","))
        compile_metric(regex)
        extra = shlex.split(profile_args)
    except OverheadError as e:
        raise BadInput(str(e)) from None
    except ValueError as e:  # shlex: an unclosed quote
        raise BadInput(f"--profile-args: {e}") from None
    if max_overhead is not None or max_added_wall is not None:
        if "perfkit" not in arm_list:
            raise BadInput("--max-overhead / --max-added-wall gate the perfkit arm: include it in --arms")
    return regex, arm_list, extra


def _check_target(arm_list: list[str], target: str, module: str | None) -> None:
    """The arms' libraries are installed and the target exists, before anything runs."""
    from perfkit.cli.requires import require
    from perfkit.profile.runner import TargetError, check_target

    needs = (("torch", "numpy") if "perfkit" in arm_list else ()) + (("torch",) if "torch-profiler" in arm_list else ())
    require("overhead", *needs)
    try:
        check_target(target, module is not None)
    except TargetError as e:
        raise BadInput(str(e)) from None


def _outputs(json_path, md_path, target: str, args: list[str], module: str | None) -> dict:
    """``{option: (path as given, resolved path)}`` of the results' files, each checked writable first."""
    from perfkit.cli.paths import check_output, distinct_outputs, program_inputs
    from perfkit.outputs import resolve

    distinct_outputs({"--json": json_path, "--markdown": md_path})
    outputs = {}
    for opt, path in (("--json", json_path), ("--markdown", md_path)):
        if path:
            p = resolve(path)
            check_output(p, path, program_inputs(target, args, module is not None), what=opt, note=" (nothing was run)")
            outputs[opt] = (path, p)
    return outputs


def _writer(outputs: dict):
    """``write(result)``: the results as JSON and Markdown where asked (after every round); a file that
    cannot be written is said, and the measurement goes on."""
    import json

    from perfkit.overhead.measure import markdown
    from perfkit.outputs import describe_error, write_text

    def write(result) -> None:
        for opt, (shown, p) in outputs.items():
            text = json.dumps(result, indent=1) + "\n" if opt == "--json" else markdown(result)
            try:
                write_text(p, text)
            except OSError as e:
                click.echo(f"Error: {describe_error(shown, e)}", err=True)

    return write


def _progress(rounds: int, result_name: str):
    """``on_run(run)``: one line per finished run."""

    def progress(run) -> None:
        where = "warm-up" if run["round"] == 0 else f"round {run['round']}/{rounds}"
        what = (f"{result_name} {run['metric']:,.6g}" if run["metric"] is not None else "") if run["ok"] else f"FAILED ({run['reason']})"
        click.echo(f"[{where}] {run['arm']:<15} {what}  wall {run['wall_s']:.1f} s", err=True)

    return progress


def _problems(result: dict, max_overhead: float | None, max_added_wall: float | None) -> list[str]:
    """Failed runs and failed gates, one line each."""
    from perfkit.overhead.measure import check_gates

    problems = []
    fails = result["summary"]["failures"]
    if fails:
        problems.append(f"{len(fails)} run(s) failed: " + ", ".join(
            f"{'warm-up' if f['round'] == 0 else 'round ' + str(f['round'])} {f['arm']} ({f['reason']})" for f in fails))
    return problems + check_gates(result, max_overhead, max_added_wall)
