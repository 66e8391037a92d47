"""The console summary of a run (``perfkit profile`` prints it to stderr, so the program's stdout stays
the program's): throughput, step times, a per-segment table and the top findings with their lines."""

from __future__ import annotations

import sys
from typing import IO

from perfkit.record import (
    EXTRA_NOTES,
    EXTRA_PRICING,
    EXTRA_TOTAL_STEPS,
    EXTRA_VERIFY,
    EXTRA_WARMUP_STEPS,
    EXTRA_WHAT_IF,
    EXTRA_WHAT_IF_TABLE,
    Run,
)


def _child_rows(t, s, depth: int) -> None:
    from rich.markup import escape

    for child, c in sorted((s.children or {}).items(), key=lambda kv: -(kv[1].gpu_ms_per_step or kv[1].cpu_ms_per_step)):
        t.add_row(f"{'  ' * depth}{escape(child)}", _fmt(c.cpu_ms_per_step), _fmt(c.gpu_ms_per_step), _fmt(c.syncs_per_step),
                  _fmt(c.allocs_per_step), _fmt(c.calls_per_step), style="dim")
        _child_rows(t, c, depth + 1)


def _fmt(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"


def render(run: Run, file: IO[str] | None = None, top: int = 10, width: int | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = file if file is not None else sys.stderr
    con = Console(file=out, width=width or 120, highlight=False, soft_wrap=False)
    cmd = " ".join(run.command) or "(no command)"
    status = "" if run.status == "complete" else f"  [bold red]{run.status}[/]"
    con.print(f"[bold]perfkit[/] {escape(cmd)}{status}")
    dev = run.machine.get("device", "?")
    env = f"{run.num_envs} envs" if run.num_envs else "num_envs unknown"
    if run.steps:
        con.print(
            f"  {env} on {dev}: [bold]{_fmt(run.sps, 4)} {run.throughput_unit}[/]  step p50 {_fmt(run.step_ms.get('p50'))} ms"
            f"  p99 {_fmt(run.step_ms.get('p99'))} ms  ({run.steps} steady steps, warm-up {_fmt(run.warmup_s)} s"
            f" over {run.extra.get(EXTRA_WARMUP_STEPS, 0)} steps)"
        )
    else:
        total = run.extra.get(EXTRA_TOTAL_STEPS, 0)
        con.print(f"  {env} on {dev}: {total} step(s) detected, none in steady state (warm-up {run.extra.get(EXTRA_WARMUP_STEPS, 0)})")
    if run.segments:
        t = Table(title=None, box=None, pad_edge=False, header_style="bold")
        for c in ("segment", "cpu ms/step", "gpu ms/step", "syncs/step", "allocs/step", "calls/step"):
            t.add_column(c, justify="left" if c == "segment" else "right")
        for name, s in run.segments.items():
            t.add_row(name, _fmt(s.cpu_ms_per_step), _fmt(s.gpu_ms_per_step), _fmt(s.syncs_per_step),
                      _fmt(s.allocs_per_step), _fmt(s.calls_per_step))
            _child_rows(t, s, 1)
        con.print(t)
        if any(s.children for s in run.segments.values()):
            con.print("  [dim](indented: what 'other' holds, by name: the env step's callees, deeper under one that "
                      "dominates, and the env step's and the training loop's own code)[/]")
        con.print("  [dim]calls/step: times per steady-state step the loop entered the segment from another one[/]")
    if run.steps and run.num_envs is None:
        con.print("  [dim]steps/s counts loop steps: the stepped object has no num_envs; give it with "
                  "--num-envs N or perfkit.step(num_envs=N) for env-steps/s and per-env loop detection[/]")
    findings = sorted(run.findings, key=lambda f: (-(f.est_ms_per_step or 0.0), -f.per_step))
    if findings:
        con.print(f"[bold]findings[/] ({len(findings)}; top {min(top, len(findings))}, by where they live)")
        shown = findings[:top]
        groups = [None] + sorted({f.library for f in shown if f.library})
        for lib in groups:
            group = [f for f in shown if f.library == lib]
            if not group:
                continue
            if lib is None:
                con.print("  [bold]your code[/]")
            else:
                con.print(f"  [bold]{escape(lib)}[/] [dim](a library: change the call in your code shown after 'via', "
                          f"configure or subclass the library, or report it upstream)[/]")
            for f in group:
                extra = (" [dim](would sync on GPU)[/]" if f.would_sync_on_gpu else "") + (f" [dim]thread {f.thread}[/]" if f.thread else "")
                cost = f"  ~{_fmt(f.est_ms_per_step)} ms/step{_source_tag(run, f)}" if f.est_ms_per_step is not None else ""
                con.print(f"    [bold]{f.kind:<6}[/] {f.path}:{f.line}  {escape(f.op)}  in {escape(f.function or '?')}()"
                          f" {escape('[' + f.segment + ']')}  {_fmt(f.per_step)}/step{cost}{extra}")
                if f.code:
                    con.print(f"           [dim]{escape(f.code)}[/]")
                if len(f.chain) > 1:
                    con.print(f"           [dim]via {escape(f.chain[-1])}[/]")
    else:
        con.print("[green]no syncs, allocations, per-env loops or stream hazards found[/]")
    _what_if(con, run)
    ver = run.extra.get(EXTRA_VERIFY)
    if isinstance(ver, dict) and ver.get("steps"):
        colour = "green" if not ver.get("unattributed") else "red"
        con.print(f"  verify: {ver['runtime_syncs']} runtime syncs in {ver['steps']} steps, "
                  f"[{colour}]{ver['unattributed']} unattributed[/]")
    for note in run.extra.get(EXTRA_NOTES, []):
        con.print(f"  [yellow]note:[/] {escape(note)}")


# ---- pricing: where each price comes from, and the what-if table (perfkit.analysis.cost) -------------
_TAGS = {"measured": "measured here", "probe": "this machine's probe", "other": "another machine's profile"}


def _source_tag(run: Run, f) -> str:
    """`` [ref. H200, bounded]``: where a finding's price comes from, in brief."""
    src = ((run.extra.get(EXTRA_PRICING) or {}).get("source_of") or {}).get(f"{f.site} {f.op}")
    if not isinstance(src, dict):
        return ""
    label = src.get("label") or ""
    if src.get("source") in ("reference", "reference_same_gpu"):
        tag = "ref. " + (label.split()[1] if len(label.split()) > 1 else "profile")
    else:
        tag = _TAGS.get(src.get("source"), src.get("source") or "?")
    if src.get("unbounded_ms") is not None:
        tag += ", bounded"
    return f" [dim]\\[{tag}][/]"


def _what_if(con, run: Run) -> None:
    """The what-if table (fixing the top 1..N, cumulative), the summary line, and the pricing notes."""
    from rich.markup import escape
    from rich.table import Table

    rows = run.extra.get(EXTRA_WHAT_IF_TABLE)
    wi = run.extra.get(EXTRA_WHAT_IF) or {}
    summary = wi.get("summary")
    if not isinstance(rows, list) or not rows or not summary:
        return
    unit = run.throughput_unit
    con.print(f"[bold]what if[/] (the top {len(rows)} fixed in order, cumulative; mean step {_fmt(wi.get('step_ms'))} "
              f"ms = {_fmt(wi.get('sps'), 4)} {unit})")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for c in ("#", "fix", "ms/step", "price from", "validation", "step ms", unit):
        t.add_column(c, justify="left" if c in ("fix", "price from", "validation") else "right",
                     overflow="fold", no_wrap=c in ("#", "step ms", unit),
                     min_width={"validation": 24}.get(c),
                     max_width={"fix": 28, "price from": 24, "validation": 27, "ms/step": 16}.get(c))
    bounded = False
    for r in rows:
        price = _fmt(r.get("est_ms_per_step"))
        if r.get("unbounded_ms") is not None:
            price += f" ({_fmt(r['unbounded_ms'])})"
            bounded = True
        site = str(r.get("site") or "")
        short = site.replace("\\", "/").rsplit("/", 1)[-1]  # the findings above name the whole path
        source = (r.get("source_label") or "-").split("; bounded by")[0]  # the bound: "(of X)" and the note below
        t.add_row(str(r.get("rank")), escape(f"{short} {r.get('op')}"), price,
                  escape(source), escape(r.get("validation") or "-"),
                  _fmt(r.get("step_ms_after")), _fmt(r.get("sps_after"), 4))
    con.print(t)
    if bounded:
        con.print("  [dim]ms/step: the price of fixing it, bounded by the measured time of the segment it sits in "
                  "(in brackets: the price before the bound)[/]")
    con.print(f"  {escape(summary)}")
    for line in wi.get("notes") or []:
        con.print(f"  [dim]{escape(line)}[/]")
