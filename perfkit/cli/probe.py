"""``perfkit probe``: measure this machine's primitive costs into its (cached) cost profile."""

from __future__ import annotations

import click

from perfkit.formatting import num


def _names(ctx, param, values):
    names = []
    for v in values:
        names.extend(n.strip() for n in v.split(",") if n.strip())
    from perfkit.probes import PROBES  # light: the registry imports no probe module

    bad = [n for n in names if n not in PROBES]
    if bad:
        raise click.BadParameter(f"unknown probe {', '.join(map(repr, bad))}; known: {', '.join(PROBES)}")
    return tuple(dict.fromkeys(names))


def _fmt(v) -> str:
    return num(v, 4) if isinstance(v, float) else str(v)


def render_table(profile: dict, names: list[str]):
    """The probe results as a rich Table: one row per metric, the probe's status beside its first."""
    from rich.table import Table

    from perfkit.machine import label

    machine = profile.get("machine")
    table = Table(title=f"perfkit probe: {label(machine) if isinstance(machine, dict) else 'this machine'}",
                  show_lines=False)
    for col, kw in (("probe", {}), ("metric", {}), ("value", {"justify": "right"}), ("status", {})):
        table.add_column(col, **kw)
    for name in names:
        res = profile["probes"].get(name, {})
        status = res.get("status", "?")
        if status in ("unavailable", "error"):
            table.add_row(name, "", "", f"{status}: {res.get('reason', '')}")
            continue
        first = True
        for metric, value in res.items():
            if metric in ("status", "device", "unavailable", "seconds", "quick") or not isinstance(value, (int, float)):
                continue
            table.add_row(name if first else "", metric, _fmt(value), status if first else "")
            first = False
        for metric, why in (res.get("unavailable") or {}).items():
            table.add_row(name if first else "", metric, "-", f"unavailable: {why}")
            first = False
    return table


@click.command()
@click.option("-o", "--output", default=None, metavar="PATH",
              help="Also write the profile JSON (perfkit.machine-profile/1) here.")
@click.option("--quick", is_flag=True, help="Few iterations per probe (CI mode); less precise.")
@click.option("--only", "only", multiple=True, callback=_names, metavar="NAME",
              help="Run only these probes (repeat, or a comma list). Default: all.")
@click.option("--refresh", is_flag=True, help="Measure again even where this machine's cache has results.")
def probe(output, quick, only, refresh):
    """Measure this machine's primitive costs (sync round trip, launch, allocator, copies, markers,
    Warp interop, per-env Python loops) and store them as its cost profile.

    The profile is cached per machine, driver and torch version under ~/.cache/perfkit/; a second
    call reuses it (--refresh measures again). Reports use it to price each finding.
    """
    import sys

    from perfkit.cli.requires import require

    require("probe", "torch", "rich")
    from rich.console import Console

    from perfkit.cli.errors import BadInput
    from perfkit.pricing.machine_profile import ProfileError, cache_path, get_profile, save_profile
    from perfkit.outputs import describe_error
    from perfkit.probes import PROBES

    if output:
        from perfkit.cli.paths import check_output

        check_output(output)  # before minutes of probing

    console = Console(stderr=False)
    err = Console(stderr=True)
    names = list(only) if only else list(PROBES)
    try:
        profile, measured, reused = get_profile(
            quick=quick, only=names, refresh=refresh,
            progress=lambda n: err.print(f"[dim]probing {n}: {PROBES[n]}[/dim]"),
        )
    except ProfileError as e:
        raise BadInput(str(e)) from None
    console.print(render_table(profile, names))
    if reused:
        console.print(f"reused from cache: {', '.join(reused)}  (--refresh to measure again)")
    console.print(f"profile cached at {cache_path(profile['key'])}")
    if output:
        try:
            path = save_profile(profile, output)
        except OSError as e:
            raise BadInput(describe_error(output, e)) from None
        console.print(f"wrote {path}")
    failed = [n for n in names if profile["probes"].get(n, {}).get("status") == "error"]
    if failed:
        err.print(f"[red]probe(s) failed: {', '.join(failed)}[/red]")
        sys.exit(1)
