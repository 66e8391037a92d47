"""PNG plots for reports (matplotlib, Agg canvas; pyplot's global state is never touched).

Each function draws one figure from plain data, writes it to ``path`` and returns the path — or
returns None when there is nothing to draw (no findings, no sweep), so a report never embeds an
empty chart. :func:`draw_report` draws the figures of a report's model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from perfkit.record import SEGMENTS, Finding, Run

DPI = 110
SEGMENT_COLORS = {
    "physics": "#4C72B0",
    "policy": "#DD8452",
    "reward": "#55A868",
    "learner": "#C44E52",
    "comm": "#DA8BC3",
    "logging": "#8172B3",
    "other": "#937860",
    "env.step": "#64B5CD",
}
KIND_COLORS = {"sync": "#C44E52", "alloc": "#DD8452", "loop": "#8172B3", "stream": "#55A868"}
SERIES_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight", metadata={"Software": "perfkit"})
    return path


def segment_order(runs: Sequence[Run]) -> list[str]:
    names = {n for r in runs for n in r.segments}
    return [s for s in SEGMENTS if s in names] + sorted(names - set(SEGMENTS))


def segment_ms(run: Run, name: str) -> tuple[float, str]:
    """A segment's time per step and which clock it came from (GPU events where taken, else CPU)."""
    s = run.segments.get(name)
    if s is None:
        return 0.0, "cpu"
    if s.gpu_ms_per_step is not None:
        return float(s.gpu_ms_per_step), "gpu"
    return float(s.cpu_ms_per_step or 0.0), "cpu"


def segment_breakdown(entries: Sequence[tuple[str, Run]], path: str | Path, title: str = "Time per step by segment"):
    """One horizontal stacked bar per run (or per sweep point): ms per step in each segment."""
    entries = [(label, r) for label, r in entries if r.segments]
    if not entries:
        return None
    names = segment_order([r for _, r in entries])
    fig = _figure(8.5, 1.2 + 0.45 * len(entries))
    ax = fig.add_subplot(1, 1, 1)
    labels = [plain(label) for label, _ in entries]
    y = list(range(len(entries)))
    left = [0.0] * len(entries)
    clocks = set()
    for name in names:
        widths = []
        for _, r in entries:
            ms, clock = segment_ms(r, name)
            widths.append(ms)
            if name in r.segments:
                clocks.add(clock)
        color = SEGMENT_COLORS.get(name, SERIES_COLORS[len(clocks) % len(SERIES_COLORS)])
        ax.barh(y, widths, left=left, color=color, label=plain(name), height=0.6, edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, widths)]
    for yi, total in zip(y, left):
        ax.text(total, yi, f" {total:.3g} ms", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    clock = "GPU" if clocks == {"gpu"} else ("CPU" if clocks == {"cpu"} else "GPU where timed, else CPU")
    ax.set_xlabel(f"ms per step ({clock} time)")
    ax.set_xlim(0, max(left) * 1.18 if max(left) > 0 else 1)
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="segment", title_fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def sps_memory_vs_envs(series: Sequence[dict], path: str | Path):
    """Throughput and memory against num_envs, one line per sweep, knee marked.

    Each series: ``{"label", "num_envs": [...], "sps": [...], "physics_sps": [...], "memory_bytes": [...],
    "memory_kind": str, "failed": [(num_envs, status)], "knee": Knee}`` (completed points only in the lists).
    """
    series = [s for s in series if s["num_envs"] or s.get("failed")]
    if not series:
        return None
    fig = _figure(10, 4.2)
    ax_sps = fig.add_subplot(1, 2, 1)
    ax_mem = fig.add_subplot(1, 2, 2)
    all_n = sorted({n for s in series for n in s["num_envs"]} | {n for s in series for n, _ in s.get("failed", [])})
    mem_kinds = set()
    for i, s in enumerate(series):
        c = SERIES_COLORS[i % len(SERIES_COLORS)]
        n, sps = s["num_envs"], s["sps"]
        if n:
            ax_sps.plot(n, sps, "o-", color=c, label=plain(f"{s['label']} env SPS"), lw=1.8, ms=4)
            phys = s.get("physics_sps") or []
            if phys and any(p != q for p, q in zip(phys, sps)):
                ax_sps.plot(n, phys, "s--", color=c, alpha=0.55, label=plain(f"{s['label']} physics SPS"), lw=1.2, ms=3)
        knee = s.get("knee")
        if knee is not None and knee.num_envs is not None:
            ax_sps.axvline(knee.num_envs, color=c, ls=":", lw=1.2)
            ax_sps.plot([knee.num_envs], [knee.sps], marker="*", ms=14, color=c, mec="black", mew=0.6, zorder=5)
            at_left = knee.num_envs == min(n) if n else False  # keep the label inside the axes
            ax_sps.annotate(f"knee {_short(knee.num_envs)}", (knee.num_envs, knee.sps), textcoords="offset points",
                            xytext=(10, 6) if at_left else (-10, 9), ha="left" if at_left else "right",
                            fontsize=8, color=c, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
        mem = s.get("memory_bytes") or []
        if mem and any(m for m in mem):
            pts = [(a, b / 2**30) for a, b in zip(n, mem) if b]
            ax_mem.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=c, label=plain(s["label"]), lw=1.8, ms=4)
            mem_kinds.add(s.get("memory_kind", "memory"))
        for fn, status in s.get("failed", []):
            for ax in (ax_sps, ax_mem):
                ax.axvline(fn, color="#C44E52", alpha=0.25, lw=6)
            ax_sps.annotate(status.upper(), (fn, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                            textcoords="offset points", ha="center", fontsize=7, color="#C44E52", rotation=90)
    for ax in (ax_sps, ax_mem):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_n, [_short(n) for n in all_n], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("num_envs")
        ax.grid(alpha=0.3)
    if any(s["num_envs"] for s in series):
        ax_sps.set_yscale("log")
        ax_sps.set_ylabel("steps / s (log)")
    else:  # every point failed: nothing to put on a log axis
        failed = sum(len(s.get("failed", [])) for s in series)
        ax_sps.set_ylabel("steps / s")
        ax_sps.set_yticks([])
        ax_sps.text(0.5, 0.5, f"all {failed} points failed", ha="center", va="center", transform=ax_sps.transAxes)
    thr = next((s["knee"].threshold for s in series if s.get("knee") is not None), None)
    ax_sps.set_title("Throughput vs num_envs" + (f" (knee: doubling gains < {thr:.0%})" if thr else ""), fontsize=10, loc="left")
    if ax_sps.get_legend_handles_labels()[0]:
        ax_sps.legend(fontsize=7, loc="upper left", frameon=False)
    kind = mem_kinds.pop() if len(mem_kinds) == 1 else "memory"
    ax_mem.set_ylabel(f"{kind} (GiB)")
    mem_top = max((max(ln.get_ydata()) for ln in ax_mem.lines), default=0)
    ax_mem.set_ylim(0, mem_top * 1.15 if mem_top > 0 else 1)
    ax_mem.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax_mem.set_title("Memory vs num_envs", fontsize=10, loc="left")
    if ax_mem.get_legend_handles_labels()[0]:  # (a failed point's band is a line without a label)
        ax_mem.legend(fontsize=7, loc="upper left", frameon=False)
    else:
        ax_mem.text(0.5, 0.5, "no memory measured", ha="center", va="center", transform=ax_mem.transAxes)
    fig.tight_layout()
    return _save(fig, path)


def step_time_distribution(series: Sequence[tuple[str, Sequence[float]]], path: str | Path,
                           title: str = "Step-time distribution"):
    """Box per series (whiskers p1..p99, median line), p50/p99 written beside each."""
    series = [(label, [float(x) for x in xs]) for label, xs in series if xs]
    if not series:
        return None
    fig = _figure(8.5, 1.2 + 0.42 * len(series))
    ax = fig.add_subplot(1, 1, 1)
    data = [xs for _, xs in series]
    import matplotlib

    # whiskers at the interpolated p1/p99 (the same p99 the tables show), not at the nearest sample
    import numpy as np

    stats = []
    for label, xs in series:
        p1, q1, med, q3, p99 = (float(v) for v in np.quantile(xs, [0.01, 0.25, 0.5, 0.75, 0.99]))
        stats.append({"label": "", "med": med, "q1": q1, "q3": q3, "whislo": p1, "whishi": p99, "fliers": []})
    horizontal = {"orientation": "horizontal"} if _mpl_version(matplotlib) >= (3, 10) else {"vert": False}
    bp = ax.bxp(stats, showfliers=False, patch_artist=True, widths=0.55, medianprops={"color": "black"}, **horizontal)
    for i, patch in enumerate(bp["boxes"]):
        patch.set_facecolor(SERIES_COLORS[i % len(SERIES_COLORS)])
        patch.set_alpha(0.6)
    for i, st in enumerate(stats, start=1):
        p50, p99 = st["med"], st["whishi"]
        ax.plot([p99], [i], marker="|", ms=14, color="#C44E52")
        ax.annotate(f"p50 {p50:.3g} ms\np99 {p99:.3g} ms", (1.0, i), xycoords=("axes fraction", "data"), xytext=(6, 0),
                    textcoords="offset points", va="center", ha="left", fontsize=7)
    ax.set_yticks(range(1, len(series) + 1), [plain(label) for label, _ in series], fontsize=8)
    ax.invert_yaxis()
    lo = min(min(xs) for xs in data)
    hi = max(max(xs) for xs in data)
    if lo > 0 and hi / lo > 30:
        from matplotlib.ticker import LogLocator, StrMethodFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax.xaxis.set_minor_formatter(StrMethodFormatter(""))
    ax.set_xlim(right=hi * (1.3 if ax.get_xscale() == "log" else 1.05))
    ax.set_xlabel("step time (ms)" + (", log scale" if ax.get_xscale() == "log" else "")
                  + "  -  box: p25-p75, whiskers: p1-p99, red tick: p99")
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def top_findings(entries: Sequence[tuple[str, Finding]], path: str | Path, top: int = 12):
    """The costliest findings as horizontal bars: estimated ms per step where priced, else count per step."""
    entries = list(entries)
    if not entries:
        return None
    priced = [e for e in entries if e[1].est_ms_per_step is not None]
    use_cost = bool(priced)
    rows = priced if use_cost else entries
    key = (lambda e: e[1].est_ms_per_step) if use_cost else (lambda e: e[1].per_step)
    rows = sorted(rows, key=key, reverse=True)[:top]
    fig = _figure(9, 1.1 + 0.36 * len(rows))
    ax = fig.add_subplot(1, 1, 1)
    values = [key(e) or 0.0 for e in rows]
    labels = [_finding_label(label, f) for label, f in rows]
    colors = [KIND_COLORS.get(f.kind, "#8C8C8C") for _, f in rows]
    y = list(range(len(rows)))
    ax.barh(y, values, color=colors, height=0.6)
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:.3g}", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.2 if max(values) > 0 else 1)
    ax.set_xlabel("estimated cost, ms per step" if use_cost else "occurrences per step (not priced: run `perfkit probe`)")
    ax.set_title("Top findings" + (" by estimated cost" if use_cost else ""), fontsize=10, loc="left")
    from matplotlib.patches import Patch

    kinds = sorted({f.kind for _, f in rows})
    ax.legend(handles=[Patch(color=KIND_COLORS.get(k, "#8C8C8C"), label=k) for k in kinds], fontsize=7,
              loc="lower right", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def _finding_label(label: str, f: Finding) -> str:
    where = f"{Path(f.path).name}:{f.line}"
    text = f"{f.op} @ {where} [{f.segment}]"
    if label:
        text = f"{label}: {text}"
    return plain(text if len(text) <= 70 else text[:67] + "...")


def _mpl_version(matplotlib) -> tuple[int, int]:
    major, minor = matplotlib.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def plain(text: object) -> str:
    """A user string as literal plot text: matplotlib would read ``$...$`` as mathtext."""
    return str(text).replace("$", r"\$")


def _short(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)


def draw_report(rep, out_dir: str | Path) -> list:
    """Draw every figure of a report (:class:`perfkit.analysis.report_model.Report`) that has data
    into ``out_dir``, setting each figure's ``path``; figures without data are dropped from the report."""
    out = Path(out_dir)
    data = rep.plot_data
    draw = {
        "sps_memory.png": lambda p: sps_memory_vs_envs(data["sps"], p),
        "segments.png": lambda p: segment_breakdown(data["segments"], p),
        "step_times.png": lambda p: step_time_distribution(data["dist"], p),
        "findings.png": lambda p: top_findings(data["findings"], p),
    }
    kept = []
    for fig in rep.figures:
        target = out / fig.name
        if target.exists() or target.is_symlink():
            target.unlink()  # never leave a stale plot from an earlier report beside this one
        fig.path = draw[fig.name](target)
        if fig.path is not None:
            kept.append(fig)
    rep.figures = kept
    return kept
