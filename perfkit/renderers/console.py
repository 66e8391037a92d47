"""The console summary of a run (``perfkit profile`` prints it to stderr, so the program's stdout stays
the program's): throughput, step times, a per-segment table and the top findings with their lines."""

from __future__ import annotations

import io
from typing import IO

from perfkit.formatting import num
from perfkit.record import (
    EXTRA_NOTES,
    EXTRA_TRACEBACK,
    EXTRA_SYNC_SOURCE,
    EXTRA_CUDA_ALLOCATOR_PERIODS,
    EXTRA_VERIFY,
    Run,
)
from perfkit.renderers.base import Renderer


def _child_rows(t, s, depth: int) -> None:
    from rich.markup import escape

    for child, c in sorted((s.children or {}).items(), key=lambda kv: -(kv[1].gpu_ms_per_step or kv[1].cpu_ms_per_step)):
        t.add_row(f"{'  ' * depth}{escape(child)}", num(c.cpu_ms_per_step), num(c.gpu_ms_per_step), num(c.syncs_per_step),
                  num(c.allocs_per_step), num(c.calls_per_step), style="dim")
        _child_rows(t, c, depth + 1)


class ConsoleRenderer(Renderer):
    """The run summary ``perfkit profile`` prints: ``top`` findings, ``width`` columns (default 120).
    ``terminal``: the stream the text is for, so that colour codes are in it exactly when rich would
    print them there (a terminal); None: plain text."""

    extension = ".txt"
    reads = "run"

    def __init__(self, top: int = 10, width: int | None = None, terminal: IO[str] | None = None):
        self.top, self.width, self.terminal = top, width, terminal

    def render(self, run: Run) -> str:
        from rich.console import Console

        con = Console(file=self.terminal if self.terminal is not None else io.StringIO(), width=self.width or 120,
                      highlight=False, soft_wrap=False)
        with con.capture() as text:
            _headline(con, run)
            _segments(con, run)
            _findings(con, run, self.top)
            _what_if(con, run)
            ver = run.extra.get(EXTRA_VERIFY)
            if isinstance(ver, dict) and ver.get("steps"):
                _verify(con, ver)
            _notes(con, run)
        return text.get()


def _headline(con, run: Run) -> None:
    """The command, its status, and the run's throughput and step times (or why it has none)."""
    from rich.markup import escape

    cmd = " ".join(run.command) or "(no command)"
    status = "" if run.status == "complete" else f"  [bold red]{run.status}[/]"
    con.print(f"[bold]perfkit[/] {escape(cmd)}{status}")
    dev = run.machine.get("device", "?")
    env = f"{run.num_envs} envs" if run.num_envs else "num_envs unknown"
    if run.steps:
        con.print(
            f"  {env} on {dev}: [bold]{num(run.sps, 4)} {run.throughput_unit}[/]  step p50 {num(run.step_ms.get('p50'))} ms"
            f"  p99 {num(run.step_ms.get('p99'))} ms  ({run.steps} steady steps, warm-up {num(run.warmup_s)} s"
            f" over {run.warmup_steps} steps)"
        )
    else:
        con.print(f"  {env} on {dev}: {run.total_steps} step(s) detected, none in steady state (warm-up {run.warmup_steps})")


def _segments(con, run: Run) -> None:
    """The per-segment table, what 'other' holds indented below it."""
    from rich.table import Table

    if run.segments:
        t = Table(title=None, box=None, pad_edge=False, header_style="bold")
        for c in ("segment", "cpu ms/step", "gpu ms/step", "syncs/step", "allocs/step", "calls/step"):
            t.add_column(c, justify="left" if c == "segment" else "right")
        for name, s in run.segments.items():
            t.add_row(name, num(s.cpu_ms_per_step), num(s.gpu_ms_per_step), num(s.syncs_per_step),
                      num(s.allocs_per_step), num(s.calls_per_step))
            _child_rows(t, s, 1)
        con.print(t)
        if any(s.children for s in run.segments.values()):
            con.print("  [dim](indented: what 'other' holds, by name: the env step's callees, deeper under one that "
                      "dominates, and the env step's and the training loop's own code)[/]")
        con.print("  [dim]calls/step: times per steady-state step the loop entered the segment from another one[/]")
        counted = run.extra.get(EXTRA_CUDA_ALLOCATOR_PERIODS)
        if counted:
            learner = counted.get("learner_allocs_per_step")
            con.print(f"  [dim]CUDA allocator: {num(counted.get('allocs_per_step'))} allocations/step over "
                      f"{counted.get('periods')} whole periods ({counted.get('steps')} steps)"
                      + (f", learner {num(learner)}" if learner is not None else "")
                      + "; allocs/step above: tensors created, by line, on the sampled steps[/]")
    if run.steps and run.num_envs is None:
        con.print("  [dim]steps/s counts loop steps: the stepped object has no num_envs; give it with "
                  "--num-envs N or perfkit.step(num_envs=N) for env-steps/s and per-env loop detection[/]")


def _findings(con, run: Run, top: int) -> None:
    """The costliest ``top`` findings, the script's own first, then each library's."""
    from rich.markup import escape

    findings = sorted(run.findings, key=lambda f: (-(run.price_ms(f) or 0.0), -f.per_step))
    if not findings:
        con.print("[green]no syncs, allocations, per-env loops or stream hazards found[/]")
        return
    source = {"runtime": "; syncs as the CUDA runtime reported them",
              "hooks": ""}.get(run.extra.get(EXTRA_SYNC_SOURCE, ""), "")
    con.print(f"[bold]findings[/] ({len(findings)}; top {min(top, len(findings))}, by where they live{source})")
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
            _finding(con, run, f)


def _finding(con, run: Run, f) -> None:
    from rich.markup import escape

    extra = (" [dim](would sync on GPU)[/]" if f.would_sync_on_gpu else "") + (f" [dim]thread {f.thread}[/]" if f.thread else "")
    if run.steps:
        cost = f"  ~{num(f.est_ms_per_step)} ms/step{_source_tag(run, f)}" if f.est_ms_per_step is not None else ""
        device, on_device = run.on_device_price(f)
        if on_device is not None:
            cost = f"  [dim]on an {escape(device)} this costs ~{num(on_device)} ms/step[/]"
        rate = f"{num(f.per_step)}/step{cost}"
    else:  # no step: a count over the run, and no per-step rate or price to divide it into
        rate = f"{f.count}x in the run [dim](no step detected: no per-step rate)[/]"
    con.print(f"    [bold]{f.kind:<6}[/] {f.path}:{f.line}  {escape(f.op)}  in {escape(f.function or '?')}()"
              f" {escape('[' + f.segment + ']')}  {rate}{extra}")
    if f.code:
        con.print(f"           [dim]{escape(f.code)}[/]")
    if len(f.chain) > 1 and f.chain[-1] != f.site:
        con.print(f"           [dim]via {escape(f.chain[-1])}[/]")
    elif len(f.chain) > 1:  # the runtime made it for this call (torch.distributions' checks)
        con.print(f"           [dim]made inside {escape(f.chain[0])} for this call[/]")
    if f.message:
        con.print(f"           [green]fix:[/] {escape(f.message)}")
    if f.kind == "sync":
        con.print(f"           [dim]{_lint_xref(f)}[/]")


def _notes(con, run: Run) -> None:
    """The record's notes, then perfkit's own cost in one line."""
    from rich.markup import escape

    for note in run.extra.get(EXTRA_NOTES, []):
        con.print(f"  [yellow]note:[/] {escape(note)}")
    trace = run.extra.get(EXTRA_TRACEBACK)
    if isinstance(trace, str) and trace.strip():  # perfkit's own error, where the record is incomplete
        con.print(f"  [yellow]perfkit's error:[/] [dim]{escape(trace.strip().splitlines()[-1])}[/]")
    line = self_line(run)
    if line:
        con.print(f"[dim]{escape(line)}[/]")


def self_line(run: Run) -> str | None:
    """The one line on perfkit's own cost (the record's ``self`` block), None where it has none."""
    own = run.self
    if own is None:
        return None
    mean = run.step_ms.get("mean")
    pct = f" ({own.per_step_ms / (mean - own.per_step_ms) * 100:.1f} %)" if mean and mean > own.per_step_ms else ""
    rest = own.one_off_s - own.startup_total_s
    more = f" (+{rest:.2f} s at special steps, samples and the record)" if rest >= 0.005 else ""
    if not run.steps:  # no step: no per-step cost to state
        return f"perfkit added {own.startup_total_s:.2f} s of start-up to this run{more}"
    return (f"perfkit added ~{own.per_step_ms:.3g} ms/step{pct} and {own.startup_total_s:.2f} s of start-up "
            f"to this run{more}")


def _verify(con, ver: dict) -> None:
    """--verify, both ways: runtime syncs no hook saw (with the line that made them) and hooked calls the
    runtime made no sync for (false reports)."""
    from rich.markup import escape

    un = ver.get("unattributed", 0)
    empty, false_reports = ver.get("hooked_without_runtime_sync", 0), ver.get("reported_without_runtime_sync", 0)
    steps = ver["steps"]
    reported = ver.get("runtime_reported", 0)
    con.print(f"  verify: {ver['runtime_syncs']} runtime syncs in {steps} steps ({ver['runtime_syncs'] / steps:.3g}/step), "
              f"{ver.get('hooked_syncs', 0)} hooked" + (f", {reported} reported by the runtime" if reported else "") +
              f"; [{'red' if un else 'green'}]{un} unattributed[/], "
              f"[{'red' if empty else 'green'}]{empty} hooked without a runtime sync[/]" +
              (f", [red]{false_reports} reported without one[/]" if false_reports else ""))
    for u in (ver.get("unattributed_sites") or [])[:5]:
        apis = ", ".join(f"{n} {a}" for a, n in u.get("apis", {}).items())
        con.print(f"    [red]unattributed[/] {escape(u['site'])} in {escape(u.get('function') or '?')}(): "
                  f"{u['count']} ({escape(apis)}) [dim]no hook saw it[/]")
    for r in (ver.get("reported_sites") or []):
        if r.get("reported_without_runtime_sync"):
            con.print(f"    [red]no runtime sync[/] {escape(r['site'])}: {r['reported_without_runtime_sync']} of "
                      f"{r['reported']} reported [dim]counted, but the profiler saw no sync there[/]")
    for s in (ver.get("sites") or []):
        if s.get("hooked_without_runtime_sync"):
            con.print(f"    [red]no runtime sync[/] {escape(s['site'])} {escape(s['op'])}: {s['hooked_without_runtime_sync']} "
                      f"of {s['hooked']} hooked calls [dim]reported, but the GPU never waited[/]")
    agreed = ver.get("agreement")
    if agreed:
        off = agreed.get("sites_outside_tolerance", 0)
        tol = agreed.get("tolerance", 0.05)
        con.print(f"  verify: record {agreed['record_per_step']:.4g} vs runtime {agreed['runtime_per_step']:.4g} syncs/step "
                  f"over {agreed['steps']} steps ({escape(agreed['window'])}); "
                  f"[{'red' if off else 'green'}]{off} of {len(agreed['sites'])} sites outside ±{tol:.0%}[/]")
        for s in [s for s in agreed["sites"] if s["ratio"] is None or abs(s["ratio"] - 1) > tol][:5]:
            con.print(f"    [red]disagrees[/] {escape(s['site'])}: record {s['record_per_step']:.4g}/step, "
                      f"runtime {s['runtime_per_step']:.4g}/step")


def _lint_xref(f) -> str:
    """The static rule that finds the same sync (``perfkit lint``), or that none does: a gap in the linter."""
    if f.lint_rule:
        return f"lint: {f.lint_rule} finds this statically (perfkit lint --explain {f.lint_rule})"
    return "lint: no static rule finds this sync (a gap in the linter)"


# ---- pricing: where each price comes from, and the what-if table (perfkit.pricing.cost) -------------
_TAGS = {"measured": "measured here", "probe": "this machine's probe", "other": "another machine's profile"}


def _source_tag(run: Run, f) -> str:
    """`` [ref. H200, bounded]``: where a finding's price comes from, in brief."""
    src = (run.pricing.prices.get("source_of") or {}).get(f"{f.site} {f.op}")
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

    if not run.steps:
        return  # no step: nothing per step to price or to gain
    rows = run.pricing.what_if_table
    wi = run.pricing.what_if
    summary = wi.get("summary")
    # the notes in one line (records priced before it existed: their "prices:" note)
    note = wi.get("note") or next((n for n in wi.get("notes") or [] if str(n).startswith("prices:")), None)
    if not isinstance(rows, list) or not rows or not summary:
        if note:
            con.print(f"[bold]what if[/]: nothing priced for this machine  [dim]{escape(note)}[/]")
        return
    unit = run.throughput_unit
    con.print(f"[bold]what if[/] (the top {len(rows)} fixed in order, cumulative; mean step {num(wi.get('step_ms'))} "
              f"ms = {num(wi.get('sps'), 4)} {unit})")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for c in ("#", "fix", "ms/step", "price from", "validation", "step ms", unit):
        t.add_column(c, justify="left" if c in ("fix", "price from", "validation") else "right",
                     overflow="fold", no_wrap=c in ("#", "step ms", unit),
                     min_width={"validation": 24}.get(c),
                     max_width={"fix": 28, "price from": 24, "validation": 27, "ms/step": 16}.get(c))
    bounded = False
    for r in rows:
        price = num(r.get("est_ms_per_step"))
        if r.get("unbounded_ms") is not None:
            price += f" ({num(r['unbounded_ms'])})"
            bounded = True
        site = str(r.get("site") or "")
        short = site.replace("\\", "/").rsplit("/", 1)[-1]  # the findings above name the whole path
        source = (r.get("source_label") or "-").split("; bounded by")[0]  # the bound: "(of X)" and the note below
        t.add_row(str(r.get("rank")), escape(f"{short} {r.get('op')}"), price,
                  escape(source), escape(r.get("validation") or "-"),
                  num(r.get("step_ms_after")), num(r.get("sps_after"), 4))
    con.print(t)
    if bounded:
        con.print("  [dim]ms/step: the price of fixing it, bounded by the measured time of the segment it sits in "
                  "(in brackets: the price before the bound)[/]")
    con.print(f"  {escape(summary)}")
    if note:
        con.print(f"  [dim]{escape(note)}[/]")
