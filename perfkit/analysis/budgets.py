"""Budget checks of a run record: the per-step syncs/allocations over ``perfkit profile
--max-syncs-per-step N --max-allocs-per-step N`` (the live ``perfkit.budget`` block is
:mod:`perfkit.collectors.budget`)."""

from __future__ import annotations

from perfkit.record import EXTRA_CUDA_ALLOCATOR_PERIODS


def check_run(run, max_syncs_per_step: float | None = None, max_allocs_per_step: float | None = None) -> list[str]:
    """Budget violations of a run record, as printable lines ('' list when within budget)."""
    problems: list[str] = []
    for kind, limit in (("sync", max_syncs_per_step), ("alloc", max_allocs_per_step)):
        if limit is None:
            continue
        found = [f for f in run.findings if f.kind == kind]
        total = sum(f.per_step for f in found)
        counted = (run.extra or {}).get(EXTRA_CUDA_ALLOCATOR_PERIODS) if kind == "alloc" else None
        if counted and counted.get("allocs_per_step", 0) > max(total, limit) + 1e-9:
            # the allocator's count over every whole period, beyond what the sampled steps attributed
            problems.append(f"{counted['allocs_per_step']:g} allocs per step > budget {limit:g} (the CUDA allocator's "
                            f"count over {counted.get('periods')} whole periods); by line, from the sampled steps:")
            problems.extend(_lines(found))
            continue
        if total > limit + 1e-9:
            problems.append(f"{total:g} {kind}s per step > budget {limit:g}:")
            problems.extend(_lines(found))
    return problems


def _lines(found: list) -> list[str]:
    return [f"  {f.path}:{f.line}  {f.op} {f.per_step:g}/step x{f.count} in {f.function or '?'}() [{f.segment}]"
            for f in sorted(found, key=lambda f: -f.per_step)]


