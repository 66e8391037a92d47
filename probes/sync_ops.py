"""Which calls of the sometimes-syncing ops make the CUDA runtime wait: the ground truth behind
perfkit's sync decisions (``perfkit.collectors.torch_sync``: devices, sizes, ``non_blocking``, pinned
memory, where an index lives). Run on a CUDA machine; not one of the cost probes (``PROBES``).

For each case (one statement of one op class, :data:`CASES`), three passes of ``calls`` calls each:

* **runtime** — torch.profiler with CUPTI activity; each call inside its own ``record_function`` ranges
  (the step/sync range shape ``--verify`` reads, so the counting is :func:`perfkit.collectors.verify.analyze`'s:
  each range once, its CPU-side event); the synchronizing runtime calls (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, synchronous ``cudaMemcpy``, ...) per call;
* **sync debug** — the warnings of ``torch.cuda.set_sync_debug_mode("warn")`` per call (what the
  runtime itself says synced);
* **perfkit** — the syncs perfkit's hooks count per call (``perfkit.budget``, CUDA tensors) and the ops
  they name.

``agree`` is perfkit's count equal to the runtime's. Prints a table and writes ``sync_ops.json``::

    python -m perfkit.probes.sync_ops --out DIR      # or: python probes/sync_ops.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run as a file from a checkout: the checkout's perfkit
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass(frozen=True)
class Case:
    """One statement of one op class: ``row`` is the patch-table row it exercises (``Tensor.to``), ``op``
    the op label of that row it is about, ``stmt`` run with :func:`_setup`'s names."""

    name: str
    row: str
    op: str
    stmt: str


CASES: tuple[Case, ...] = (
    # reads through an index
    Case("t[list]", "Tensor.__getitem__", "t[list]", "d[[0, 5, 9]]"),
    Case("t[[]] (empty list)", "Tensor.__getitem__", "t[list]", "d[[]]"),
    Case("t[ndarray]", "Tensor.__getitem__", "t[ndarray]", "d[np_idx]"),
    Case("t[ndarray] (bool)", "Tensor.__getitem__", "t[ndarray]", "d[np_mask]"),
    Case("t[ndarray] (empty)", "Tensor.__getitem__", "t[ndarray]", "d[np_empty]"),
    Case("t[cpu_idx]", "Tensor.__getitem__", "t[cpu_idx]", "d[idx_h]"),
    Case("t[cuda_idx]", "Tensor.__getitem__", "t[cpu_idx]", "d[idx_d]"),
    Case("t[bool_mask]", "Tensor.__getitem__", "t[bool_mask]", "d[mask_d]"),
    # writes through an index
    Case("t[list] = scalar", "Tensor.__setitem__", "t[list] = v", "d[[0, 5]] = 1.0"),
    Case("t[ndarray] = v", "Tensor.__setitem__", "t[ndarray] = v", "d[np_idx] = v3"),
    Case("t[idx] = scalar", "Tensor.__setitem__", "t[idx] = scalar", "d[idx_d] = 0.0"),
    Case("t[idx] = v (device)", "Tensor.__setitem__", "t[idx] = scalar", "d[idx_d] = v3"),
    Case("t[i] = scalar", "Tensor.__setitem__", "t[i] = scalar", "d[5] = 0.0"),
    Case("t[i:i+1] = scalar", "Tensor.__setitem__", "t[i] = scalar", "d[5:6] = 0.0"),
    Case("t[bool_mask] = v", "Tensor.__setitem__", "t[bool_mask] = v", "d[mask_d] = s_d"),
    Case("t[bool_mask] = scalar", "Tensor.__setitem__", "t[bool_mask] = v", "d[mask_d] = 0.0"),
    # .to
    Case('.to("cpu")', "Tensor.to", '.to("cpu")', 'd.to("cpu")'),
    Case('.to("cpu", non_blocking)', "Tensor.to", '.to("cpu")', 'd.to("cpu", non_blocking=True)'),
    Case('.to("cpu") (empty)', "Tensor.to", '.to("cpu")', 'e_d.to("cpu")'),
    Case('.to("cuda") pageable', "Tensor.to", '.to("cuda")', 'h.to("cuda")'),
    Case('.to("cuda", non_blocking) pageable', "Tensor.to", '.to("cuda")', 'h.to("cuda", non_blocking=True)'),
    Case('.to("cuda", non_blocking) pinned', "Tensor.to", '.to("cuda")', 'p.to("cuda", non_blocking=True)'),
    Case('.to("cuda") (already there)', "Tensor.to", '.to("cuda")', 'd.to("cuda")'),
    Case('.to("cuda") (empty)', "Tensor.to", '.to("cuda")', 'e_h.to("cuda")'),
    # copy_
    Case("cpu_t.copy_(cuda_t) pageable", "Tensor.copy_", "cpu_t.copy_(cuda_t)", "h.copy_(d)"),
    Case("cpu_t.copy_(cuda_t, non_blocking) pageable", "Tensor.copy_", "cpu_t.copy_(cuda_t)", "h.copy_(d, non_blocking=True)"),
    Case("cpu_t.copy_(cuda_t, non_blocking) pinned", "Tensor.copy_", "cpu_t.copy_(cuda_t)", "p.copy_(d, non_blocking=True)"),
    Case("cpu_t.copy_(cuda_t) (empty)", "Tensor.copy_", "cpu_t.copy_(cuda_t)", "e_h.copy_(e_d)"),
    Case("cuda_t.copy_(cpu_t) pageable", "Tensor.copy_", "cuda_t.copy_(cpu_t)", "d.copy_(h)"),
    Case("cuda_t.copy_(cpu_t, non_blocking) pageable", "Tensor.copy_", "cuda_t.copy_(cpu_t)", "d.copy_(h, non_blocking=True)"),
    Case("cuda_t.copy_(cpu_t, non_blocking) pinned", "Tensor.copy_", "cuda_t.copy_(cpu_t)", "d.copy_(p, non_blocking=True)"),
    # .cuda()
    Case(".cuda() pageable", "Tensor.cuda", ".cuda()", "h.cuda()"),
    Case(".cuda(non_blocking) pinned", "Tensor.cuda", ".cuda()", "p.cuda(non_blocking=True)"),
    Case(".cuda() (already there)", "Tensor.cuda", ".cuda()", "d.cuda()"),
    Case(".cuda() (empty)", "Tensor.cuda", ".cuda()", "e_h.cuda()"),
    # torch.tensor(data, device=cuda)
    Case("torch.tensor(list, device=cuda)", "tensor", "torch.tensor(list, device=cuda)", 'torch.tensor([1.0, 2.0], device="cuda")'),
    Case("torch.tensor(scalar, device=cuda)", "tensor", "torch.tensor(list, device=cuda)", 'torch.tensor(3.0, device="cuda")'),
    Case("torch.tensor([], device=cuda)", "tensor", "torch.tensor(list, device=cuda)", 'torch.tensor([], device="cuda")'),
    Case("torch.tensor(ndarray, device=cuda)", "tensor", "torch.tensor(list, device=cuda)", 'torch.tensor(np_idx, device="cuda")'),
    # where, repeat_interleave
    Case("torch.where(cond)", "where", "torch.where(cond)", "torch.where(mask_d)"),
    Case("torch.where(cond, a, b)", "where", "torch.where(cond)", "torch.where(mask_d, d, 0.0)"),
    Case(".repeat_interleave(tensor)", "Tensor.repeat_interleave", ".repeat_interleave()", "d[:4].repeat_interleave(reps_d)"),
    Case(".repeat_interleave(tensor, output_size)", "Tensor.repeat_interleave", ".repeat_interleave()",
         "d[:4].repeat_interleave(reps_d, output_size=8)"),
    Case("torch.repeat_interleave(tensor)", "repeat_interleave", ".repeat_interleave()", "torch.repeat_interleave(reps_d)"),
    # syncs torch's Python code makes for its caller (validate_args given: importing torch._dynamo turns
    # distributions' default validation off process-wide)
    Case("Normal(loc, scale)", "Tensor.__bool__", "bool(t)", "torch.distributions.Normal(d, d.abs() + 1, validate_args=True)"),
    Case("Normal.log_prob", "Tensor.__bool__", "bool(t)", "normal.log_prob(d)"),
    Case("clip_grad_norm_(error_if_nonfinite)", "Tensor.__bool__", "bool(t)",
         "torch.nn.utils.clip_grad_norm_([param], 1.0, error_if_nonfinite=True)"),
)


def _setup(torch: Any) -> dict[str, Any]:
    """The names the statements use: CUDA (``d``), pageable (``h``) and pinned (``p``) host tensors, ..."""
    import numpy as np

    n = 1 << 16
    d = torch.rand(n, device="cuda")
    param = torch.nn.Parameter(torch.ones(n, device="cuda"))
    param.grad = torch.ones(n, device="cuda")
    return {
        "torch": torch, "np": np, "d": d, "h": torch.rand(n), "p": torch.rand(n).pin_memory(),
        "e_d": torch.empty(0, device="cuda"), "e_h": torch.empty(0),
        "idx_d": torch.tensor([0, 5, 9], device="cuda"), "idx_h": torch.tensor([0, 5, 9]),
        "mask_d": d > 0.5, "np_idx": np.array([0, 5, 9]), "np_mask": np.arange(n) % 3 == 0,
        "np_empty": np.array([], dtype=np.int64), "v3": torch.ones(3, device="cuda"),
        "s_d": torch.tensor(0.0, device="cuda"), "reps_d": torch.tensor([1, 2, 3, 2], device="cuda"),
        "normal": torch.distributions.Normal(d, d.abs() + 1, validate_args=True), "param": param,
    }


def _compiled(case: Case, env: dict[str, Any]) -> Callable[[], None]:
    code = compile(case.stmt, f"<sync_ops:{case.name}>", "exec")
    return lambda: exec(code, env)


def runtime_syncs(torch: Any, run: Callable[[], None], calls: int) -> dict[str, Any]:
    """Runtime sync calls per call of ``run``, counted the way ``--verify`` counts them."""
    from perfkit.collectors.verify import STEP_PREFIX, SYNC_PREFIX, analyze

    P = torch.profiler
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA]) as prof:
        for k in range(calls):
            with P.record_function(f"{STEP_PREFIX}{k}"), P.record_function(SYNC_PREFIX + "case"):
                run()
    v = analyze(prof.events())
    return {"ranges": v["hooked_syncs"], "runtime_syncs": v["runtime_syncs"], "by_api": v["by_api"],
            "per_call": round(v["runtime_syncs"] / calls, 3)}


def sync_debug_warnings(torch: Any, run: Callable[[], None], calls: int) -> float:
    """``set_sync_debug_mode("warn")`` warnings per call."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(calls):
                run()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # c10's warning: "called a synchronizing CUDA operation"
    n = sum("synchronizing" in str(w.message) for w in caught)
    return round(n / calls, 3)


def perfkit_syncs(run: Callable[[], None], calls: int) -> tuple[float, list[str]]:
    """(syncs perfkit's hooks count per call on CUDA tensors, the ops they name)."""
    from perfkit.collectors.budget import budget

    with budget(count_cpu_tensors=False) as b:
        for _ in range(calls):
            run()
    syncs = [s for s in b.sites if s.kind == "sync"]
    return round(sum(s.count for s in syncs) / calls, 3), sorted({s.op for s in syncs})


def measure(calls: int = 20) -> list[dict[str, Any]]:
    import torch

    rows = []
    for case in CASES:
        env = _setup(torch)
        run = _compiled(case, env)
        try:
            for _ in range(3):  # warm up: allocator, kernels, lazy init
                run()
            torch.cuda.synchronize()
            rt = runtime_syncs(torch, run, calls)
            torch.cuda.synchronize()
            debug = sync_debug_warnings(torch, run, calls)
            torch.cuda.synchronize()
            pk, ops = perfkit_syncs(run, calls)
            torch.cuda.synchronize()
        except Exception as e:  # one case's failure must not lose the others
            rows.append({**asdict(case), "error": f"{type(e).__name__}: {e}"})
            continue
        rows.append(row_of(case, rt, debug, pk, ops))
    return rows


def row_of(case: Case, runtime: dict[str, Any], debug_per_call: float, perfkit_per_call: float, ops: list[str]) -> dict[str, Any]:
    """One table row: the case, what the runtime did per call and what perfkit counted."""
    return {**asdict(case), "runtime_per_call": runtime["per_call"], "by_api": runtime["by_api"],
            "sync_debug_per_call": debug_per_call, "perfkit_per_call": perfkit_per_call, "perfkit_ops": ops,
            "agree": perfkit_per_call == runtime["per_call"]}


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table, disagreements marked."""
    head = f"{'case':<44} {'runtime':>7} {'debug':>6} {'perfkit':>7}  ops"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['name']:<44} error: {r['error']}")
            continue
        mark = "" if r["agree"] else "   <-- disagrees"
        lines.append(f"{r['name']:<44} {r['runtime_per_call']:>7g} {r['sync_debug_per_call']:>6g} "
                     f"{r['perfkit_per_call']:>7g}  {', '.join(r['perfkit_ops']) or '-'}{mark}")
    bad = sum(1 for r in rows if not r.get("agree"))
    lines.append(f"{len(rows) - bad} of {len(rows)} cases agree with the runtime")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfkit.probes.sync_ops", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for sync_ops.json")
    ap.add_argument("--calls", type=int, default=20, help="calls per case and pass (default 20)")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("sync_ops: needs torch (with CUDA)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sync_ops: needs a CUDA GPU (torch.cuda.is_available() is False): it measures what the CUDA runtime "
              "does; nothing was measured or written", file=sys.stderr)
        return 2
    rows = measure(a.calls)
    print(table(rows))
    os.makedirs(a.out, exist_ok=True)
    path = Path(a.out) / "sync_ops.json"
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": a.calls, "cases": rows}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
    return 0 if all(r.get("agree") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
