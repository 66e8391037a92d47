"""``perfkit lint``: the static sync-point linter's command line (a thin layer over perfkit.lint)."""

from __future__ import annotations

import os
import sys

import click

_FORMATS = ("text", "json", "sarif", "github")


def _codes(values, what):
    """Rule IDs/prefixes from the command line or the config; an unknown one is a usage error (exit 2)."""
    from perfkit.cli.errors import BadInput
    from perfkit.lint.config import ConfigError, normalize_codes
    from perfkit.lint.rules import all_rules

    try:
        codes = normalize_codes(values, what)
    except ConfigError as e:
        raise BadInput(str(e)) from None
    ids = [r.id for r in all_rules()]
    unknown = [c for c in codes if not any(i.startswith(c) for i in ids)]
    if unknown:
        raise BadInput(f"{what}: no rule matches {', '.join(unknown)} (known rules: {', '.join(ids)})")
    return codes


def _check_baseline_target(target, paths, exclude, root):
    """``--write-baseline`` must not name a file being linted (it would replace the source) and must be
    writable: refused (exit 2) before anything is linted or written."""
    from perfkit.cli.errors import BadInput
    from perfkit.lint.files import discover
    from perfkit.outputs import OutputError, check_writable, describe_error

    real = os.path.realpath(target)
    for path, problem in discover(paths, exclude, root):
        if not problem and os.path.realpath(path) == real:
            raise BadInput(f"--write-baseline {target} is one of the files being linted; "
                           "choose another path (nothing was written)")
    try:
        check_writable(target)
    except OutputError as e:
        raise BadInput(f"cannot write baseline {target!r}: {e.strerror}") from None


def _measured(fmt, violations, result, run, source) -> str:
    """The findings ranked by what ``run`` measured at their lines (perfkit.lint.measured)."""
    import json

    from perfkit.lint import measured
    from perfkit.lint.formats import text as plain_text

    joined = measured.join(violations, run, result.checked)
    if fmt == "json":
        doc = measured.to_json(joined)
        doc["errors"] = [e.to_json() for e in result.errors]
        return json.dumps(doc, indent=1) + "\n"
    summary = plain_text(violations, result.files).splitlines()[-1:] if violations else []
    return measured.text(joined, source) + "".join(line + "\n" for line in summary)


@click.command("lint", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="text", show_default=True,
              help="Output format. json: a list of {path, line, col, rule, category, message, severity}.")
@click.option("--all", "all_functions", is_flag=True, help="Treat every function as a hot path.")
@click.option("--select", multiple=True, metavar="CODES",
              help="Only these rules (IDs or prefixes, comma-separated or repeated): --select PK1,PK201.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rules (IDs or prefixes).")
@click.option("--baseline", type=click.Path(dir_okay=False), metavar="FILE",
              help="Report only findings not recorded in this baseline file.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), metavar="FILE",
              help="Record the current findings as the baseline and exit 0.")
@click.option("--explain", metavar="PKxxx", help="Print a rule's rationale and fix, then exit.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="PYPROJECT",
              help="Read [tool.perfkit.lint] from this file (default: nearest pyproject.toml).")
@click.option("--hot", multiple=True, metavar="NAME", help="Extra hot function names/patterns (Class.method ok).")
@click.option("--min-confidence", type=click.Choice(("low", "medium", "high")), default="low", show_default=True,
              help="Report only findings at least this confident (CI can gate on high).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), metavar="RUN.json",
              help="Rank the findings by the cost a `perfkit profile` record measured at their lines, and list "
                   "the runtime findings no static finding matches (text or json format).")
def lint(paths, fmt, all_functions, select, ignore, baseline, write_baseline, explain, config_path, hot,
         min_confidence, exit_zero, profile_path):
    """Report host-device syncs, allocations and per-env loops on hot paths, and timing bugs anywhere.

    Reads Python source (AST); never imports it. Exit status: 0 clean, 1 findings remain (or a file
    could not be checked), 2 usage error. `perfkit lint --explain PK101` documents a rule.
    """
    from perfkit.cli.errors import BadInput
    from perfkit.lint import baseline as baseline_mod
    from perfkit.lint import config as config_mod
    from perfkit.lint.docs import explain_text
    from perfkit.lint.engine import Options
    from perfkit.lint.files import discover
    from perfkit.lint.formats import render
    from perfkit.lint.rules import all_rules, get_rule
    from perfkit.lint.run import lint_paths

    if explain:
        try:
            rule = get_rule(explain)
        except KeyError:
            known = ", ".join(r.id for r in all_rules())
            raise BadInput(f"--explain: no rule {explain!r}; known rules: {known}") from None
        click.echo(explain_text(rule), nl=False)
        return
    if not paths:
        raise click.UsageError("give at least one file or directory to lint (or --explain PKxxx)")
    if baseline and write_baseline:
        raise click.UsageError("--baseline and --write-baseline are exclusive")
    try:
        cfg = config_mod.load(config_path, required=config_path is not None)
    except config_mod.ConfigError as e:
        raise BadInput(str(e)) from None
    options = Options(
        select=tuple(_codes(select, "--select") or _codes(cfg.select, f"{cfg.source}: select")),
        ignore=tuple(_codes(ignore, "--ignore")) + tuple(_codes(cfg.ignore, f"{cfg.source}: ignore")),
        hot=tuple(hot) + tuple(cfg.hot),
        all_functions=all_functions or cfg.all,
        min_confidence=min_confidence,
    )
    run = None
    if profile_path:
        if fmt not in ("text", "json"):
            raise click.UsageError("--profile ranks findings in the text or json format")
        from perfkit.record import RecordError, Run

        try:
            run = Run.load(profile_path)
        except RecordError as e:
            raise BadInput(str(e)) from None
    known = None
    if baseline:
        try:
            known = baseline_mod.load(baseline)
        except baseline_mod.BaselineError as e:
            raise BadInput(str(e)) from None

    root = os.path.dirname(os.path.abspath(cfg.source)) if cfg.source else None
    if write_baseline:
        _check_baseline_target(write_baseline, paths, cfg.exclude, root)
    result = lint_paths(paths, options, exclude=cfg.exclude, root=root)
    if not result.files and not result.errors and not any(True for _ in discover(paths)):  # not: all excluded
        raise BadInput(f"no Python files to lint in {', '.join(paths)} (give .py files or folders holding them)")
    for err in result.errors:
        click.echo(f"perfkit lint: {err}", err=True)
    if write_baseline:
        try:
            n = baseline_mod.write(write_baseline, result.violations)
        except OSError as e:
            raise BadInput(f"cannot write baseline {write_baseline!r}: {e.strerror or e}") from None
        click.echo(f"wrote {n} finding(s) to {write_baseline}", err=True)
        sys.exit(0)
    violations = result.violations
    if known is not None:
        violations = baseline_mod.filter_new(violations, known)
    if run is not None:
        out = _measured(fmt, violations, result, run, profile_path)
    else:
        out = render(fmt, violations, result.errors, result.files)
    if out:
        click.echo(out, nl=False)
    if fmt == "text" and not violations and not result.errors:
        click.echo(f"All clear: {result.files} file{'s' if result.files != 1 else ''} checked, no findings.", err=True)
    if (violations or result.errors) and not exit_zero:
        sys.exit(1)
