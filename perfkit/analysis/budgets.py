"""Budget checks of a run record: the per-step syncs/allocations over ``perfkit profile
--max-syncs-per-step N --max-allocs-per-step N`` (the live ``perfkit.budget`` block is
:mod:`perfkit.collectors.budget`)."""

from __future__ import annotations


def check_run(run, max_syncs_per_step: float | None = None, max_allocs_per_step: float | None = None) -> list[str]:
    """Budget violations of a run record, as printable lines ('' list when within budget)."""
    problems: list[str] = []
    for kind, limit in (("sync", max_syncs_per_step), ("alloc", max_allocs_per_step)):
        if limit is None:
            continue
        found = [f for f in run.findings if f.kind == kind]
        total = sum(f.per_step for f in found)
        if total > limit + 1e-9:
            problems.append(f"{total:g} {kind}s per step > budget {limit:g}:")
            for f in sorted(found, key=lambda f: -f.per_step):
                problems.append(f"  {f.path}:{f.line}  {f.op} {f.per_step:g}/step x{f.count} in {f.function or '?'}() [{f.segment}]")
    return problems


