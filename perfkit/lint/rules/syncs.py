"""PK1xx: host-device synchronizations on hot paths.

Each of these makes the host wait until the GPU has finished everything queued so far, so the
CPU stops running ahead and kernel launches are no longer overlapped with GPU work.
"""

from __future__ import annotations

import ast
import re

from perfkit.lint.hotpaths import resolve_call
from perfkit.lint.modinfo import error_path
from perfkit.lint.infer import (BOOL, CPU, DEVICE, HOST, HOSTISH, NDARRAY, TDICT, TENSOR, WARP, flag_attr, is_mask_name,
                                mixed_union, optional, passed_device, passed_kind, typer_for)
from perfkit.lint.registry import Rule, check, register
from perfkit.lint.modinfo import FUNC_DEFS, unit_nodes
from perfkit.lint.rules.common import is_true, kwarg, receiver_is_module

register(Rule(
    id="PK101", name="item-call", category="sync",
    summary="`.item()` on a tensor in a hot path",
    message="`.item()` copies a GPU value to the host and waits for the GPU (sync); keep the value on the device "
    "(tensor ops, `torch.where`) or read it once per log interval, off the hot path",
    rationale="`.item()` blocks until every kernel queued before it has run, then copies one number back. In a step "
    "loop that serializes CPU and GPU: the CPU can no longer queue the next step's kernels while the GPU works.",
    fix="Keep the value as a 0-dim tensor and use it in tensor ops; accumulate statistics on the device and "
    "read them once every N steps outside the hot path.",
    bad="if reward.mean().item() > best:\n    best = reward.mean().item()",
    good="best = torch.maximum(best, reward.mean())  # stays on the GPU",
))
register(Rule(
    id="PK102", name="device-to-host-copy", category="sync",
    summary="`.cpu()` / `.tolist()` / `.to('cpu')` / `.numpy(force=True)` of a GPU tensor in a hot path, or a GPU "
    "tensor written or copied into a CPU tensor (`cpu_buf[i] = t`, `cpu_buf.copy_(t)`) (a tensor's plain `.numpy()` "
    "and `np.asarray(t)` raise on a CUDA tensor: the `.cpu()` before them is the copy)",
    message="{what} copies a GPU tensor to the host and waits for the GPU (sync); keep the data on the device, or copy "
    "into pinned memory with `.to('cpu', non_blocking=True)` and read it later",
    rationale="A device-to-host copy into pageable memory is synchronous: the host waits for all queued work, then "
    "for the copy.",
    fix="Keep processing on the GPU. If the host really needs the data, copy asynchronously into a pinned buffer "
    "(`buf.copy_(t, non_blocking=True)`) and read it after an event says it is ready, a step later.",
    bad="actions_np = actions.cpu().numpy()",
    good="host_buf.copy_(actions, non_blocking=True)  # pinned buffer, read next step",
))
register(Rule(
    id="PK103", name="tensor-truth-value", category="sync",
    summary="Python truth value of a tensor: `if t:`, `while t.any():`, `assert t`, `and`/`or`/`not`, `bool(t)`",
    message="{what} reads the tensor's value on the host (sync); keep the branch on the device with "
    "`torch.where(cond, a, b)` / masked in-place ops, or drop the check from the hot path",
    rationale="Python control flow needs a Python bool, so the tensor is copied to the host, waiting for the GPU. "
    "`while t.any():` does it on every iteration.",
    fix="Make the branch data-parallel: `torch.where(mask, a, b)`, `x.masked_fill_(mask, v)`, multiply by the "
    "mask. Guards like `assert (x >= 0).all()` belong in tests, or behind a debug flag.",
    bad="if done.any():\n    self.reset_idx(done)",
    good="self.reset_where(done)  # masked in-place reset, no branch",
))
register(Rule(
    id="PK104", name="tensor-to-python-number", category="sync",
    summary="`float(t)`, `int(t)`, `math.f(t)`, `max(0, t)` / `min(t, x)`, `torch.equal`, `torch.allclose` on GPU "
    "tensors in a hot path",
    message="{what} turns a GPU tensor into a Python value (sync); keep it a tensor (`t.float()`, `torch.isclose`, "
    "tensor arithmetic) or read it off the hot path",
    rationale="Converting a tensor to a Python number or bool copies it to the host and waits for the GPU.",
    fix="Stay in tensor land: `t.to(torch.float32)`, `torch.isclose(a, b).all()` kept as a tensor, `torch.sqrt`.",
    bad="scale = float(self.gain.max())",
    good="scale = self.gain.max()  # a 0-dim tensor works in tensor ops",
))
register(Rule(
    id="PK105", name="tensor-formatting", category="sync",
    summary="printing, formatting or logging a tensor (`print(t)`, `f\"{t}\"`, `\"{}\".format(t)`, `str(t)`, "
    "`writer.add_scalar(tag, t)`)",
    message="{what} formats a GPU tensor's values on the host (sync); log device-side aggregates every N steps, "
    "off the hot path",
    rationale="Formatting needs the values, so the tensor is copied to the host after the GPU drains. "
    "TensorBoard's `add_scalar` calls `.item()` for you.",
    fix="Accumulate on the device; print or log once per log interval, outside the step loop.",
    bad="print(f\"reward {rew.mean()}\")",
    good="self.rew_sum += rew.sum()  # log self.rew_sum every 100 steps",
))
register(Rule(
    id="PK106", name="data-dependent-shape", category="sync",
    summary="ops whose output shape depends on the data: `nonzero`, one-argument `torch.where`, `masked_select`, "
    "`unique`, `argwhere`, `repeat_interleave` without `output_size`",
    message="{what} has a data-dependent output size, so the host waits for the GPU to learn it (sync); {fix}",
    rationale="The host must know the result's size to allocate it, so it waits for the GPU to finish computing it.",
    fix="Work with fixed shapes: apply the boolean mask with `masked_fill_`, `torch.where(mask, a, b)` or a "
    "multiply; use `nonzero_static(size=...)`; pass `output_size=` to `repeat_interleave`.",
    bad="ids = done.nonzero().squeeze(-1)\nself.pos[ids] = self.init_pos[ids]",
    good="self.pos.copy_(torch.where(done[:, None], self.init_pos, self.pos))",
))
register(Rule(
    id="PK107", name="boolean-mask-read", category="sync",
    summary="reading a tensor through a boolean mask (`x[mask]`)",
    message="indexing a tensor with a boolean mask has a data-dependent size (sync, a hidden `nonzero()`); use "
    "`torch.where(mask, x, 0)`, `x * mask`, or `masked_fill_` instead of indexing by the mask",
    rationale="`x[mask]` computes `mask.nonzero()` to know how many elements come out, so the host waits.",
    fix="Keep the full shape: `torch.where(mask[:, None], x, 0)`, `(x * mask).sum()`, `x.masked_fill_(~mask, 0)`. "
    "Writing through a mask (`x[mask] = 0`) is fine.",
    bad="mean_fallen = self.height[fallen].mean()",
    good="mean_fallen = (self.height * fallen).sum() / fallen.sum().clamp(min=1)",
))
register(Rule(
    id="PK108", name="list-index", category="sync",
    summary="indexing a tensor with a Python list literal (`x[[0, 2, 5]]`)",
    message="indexing with a Python list builds an index tensor on the host and copies it to the GPU each call "
    "(blocking copy); build the index tensor once on the device in `__init__` and index with it",
    rationale="A Python list index is turned into a CPU tensor and copied to the device on every call — a blocking "
    "host-to-device copy plus an allocation.",
    fix="Create the index once: `self.idx = torch.tensor([0, 2, 5], device=dev)` in `__init__`, then `x[:, self.idx]`; "
    "or use a slice when the indices are contiguous.",
    bad="feet = self.body_pos[:, [3, 6, 9, 12]]",
    good="feet = self.body_pos[:, self.feet_idx]  # feet_idx built once in __init__",
    setup_ok=True,
))
register(Rule(
    id="PK109", name="blocking-host-to-device", category="sync",
    summary="blocking host-to-device copies: `torch.tensor(data, device='cuda')` (or inside `with torch.device(d):`), "
    "`.to(device)` / `.cuda()` of host data, a host tensor written or copied into a GPU tensor (`gpu_buf[i] = "
    "host_t`, `gpu_buf.copy_(host_t)`)",
    message="{what} copies host data to the GPU synchronously; build constants once in `__init__`, or stage them in a "
    "pinned buffer and copy with `non_blocking=True`",
    rationale="Creating a device tensor from Python data (or moving a pageable CPU tensor) is a synchronous copy that "
    "also allocates.",
    fix="Hoist constants to `__init__`; for per-step host data, write into a pinned buffer and "
    "`dev_buf.copy_(pinned, non_blocking=True)`.",
    bad="gains = torch.tensor([1.0, 0.5, 0.25], device=self.device)",
    good="gains = self.gains  # created once in __init__",
    setup_ok=True,
))
register(Rule(
    id="PK110", name="explicit-synchronize", category="sync",
    summary="explicit synchronization: `torch.cuda.synchronize()`, `Event.synchronize()`, `Stream.synchronize()`, "
    "`torch.cuda.empty_cache()`",
    message="{what} blocks the host until the GPU is idle; remove it from the hot path (use `Event.record()` + "
    "`query()` for timing, `wait_stream` for ordering between streams)",
    rationale="An explicit synchronize waits for all queued work; in a step loop it removes all CPU/GPU overlap. "
    "`empty_cache()` synchronizes too, and throws away the allocator's cache.",
    fix="Order work between streams with `stream.wait_stream(other)` / `event.wait()`; time with CUDA events "
    "resolved lazily; keep synchronize for benchmarks' end points.",
    bad="torch.cuda.synchronize()\nobs = self._get_observations()",
    good="obs = self._get_observations()  # stream order already guarantees correctness",
))
register(Rule(
    id="PK111", name="warp-synchronize", category="sync",
    summary="Warp synchronization: `wp.synchronize()`, `wp.synchronize_device()`, `wp.synchronize_stream()`, "
    "`wp.synchronize_event()`",
    message="{what} blocks the host until Warp's work is done; order Warp and torch with a shared stream "
    "(`wp.ScopedStream(wp.stream_from_torch())`) instead of synchronizing",
    rationale="Warp's synchronize calls wait on the device or stream, stalling the host in the step loop.",
    fix="Launch Warp kernels on torch's current stream (`wp.stream_from_torch()`), so ordering is implicit.",
    bad="wp.launch(k, dim=n, inputs=[a])\nwp.synchronize()",
    good="with wp.ScopedStream(wp.stream_from_torch()):\n    wp.launch(k, dim=n, inputs=[a])",
))
register(Rule(
    id="PK112", name="warp-array-to-host", category="sync",
    summary="`.numpy()` / `.list()` on a Warp array in a hot path",
    message="`.{what}()` on a Warp array copies it to the host and waits for the device (sync); share it with torch "
    "zero-copy via `wp.to_torch(arr)` and keep computing on the GPU",
    rationale="A Warp array's `.numpy()` synchronizes and copies device memory to the host.",
    fix="Use `wp.to_torch(arr)` once (zero-copy view) and keep processing on the device.",
    bad="qpos = self.qpos_wp.numpy()",
    good="qpos = self.qpos_t  # wp.to_torch(self.qpos_wp), made once in __init__",
))

register(Rule(
    id="PK113", name="index-write-sync", category="sync",
    summary="writes through an index that synchronize: a Python scalar through an integer or index tensor "
            "(`buf[env_ids] = 0.0`, `x[5] = 0.`), a tensor through a boolean mask (`x[mask] = y`)",
    message="{what} makes the host wait for the GPU (sync); {fix}",
    rationale="Measured on CUDA (H200, `benchmarks/lint_real/sync_probe.py`): `x[idx] = 0.0`, `x[idx, 1] = 0.0` and "
              "`x[5] = 0.0` copy the Python scalar to the device synchronously, and `x[mask] = y` / `x[mask] += 1` "
              "count the mask's true elements on the host. `x[mask] = 0.0`, `x[:, 0] = 0.0`, `x[idx] = y`, "
              "`masked_fill_` and `index_fill_` do not wait.",
    fix="Scalars: `x.index_fill_(0, idx, 0.0)`, `x.masked_fill_(mask, 0.0)`, or write a 0-dim device tensor made "
        "once (`x[idx] = self.zero`). Tensors through a mask: `x.copy_(torch.where(mask, y, x))` or "
        "`torch.where(mask, y, x, out=x)`.",
    bad="self.episode_length_buf[env_ids] = 0",
    good="self.episode_length_buf.index_fill_(0, env_ids, 0)",
))

_SYNC_METHODS = {"item", "cpu", "numpy", "tolist", "list", "to", "cuda", "copy_", "synchronize", "nonzero", "argwhere",
                 "masked_select", "unique", "unique_consecutive", "repeat_interleave", "equal", "allclose",
                 "add_scalar", "add_scalars", "add_histogram", "debug", "info", "warning", "error", "log",
                 "critical", "exception"}
_WARP_SYNCS = {"warp.synchronize", "warp.synchronize_device", "warp.synchronize_stream", "warp.synchronize_event"}
_TORCH_SYNCS = {"torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.mps.synchronize",
                "torch.xpu.synchronize", "torch.cuda.empty_cache", "torch.cuda.current_stream.synchronize"}
_NONZERO_FIX = "use the boolean mask directly (`masked_fill_`, `torch.where(mask, a, b)`, `x * mask`) instead of " \
               "indexing by `nonzero()`, or `nonzero_static(size=...)`"
_LOGGER_NAMES = ("log", "logger", "logging", "_log", "_logger", "LOG", "LOGGER")


def _dev(ctx, e) -> bool:
    return ctx.kind(e) in DEVICE


def _maybe_tensor(ctx, e) -> bool:
    """A tensor, or unknown in a module that uses torch (the method name itself is torch-specific)."""
    return _confidence(ctx, e) is not None


def _confidence(ctx, e):
    """'high' for a device tensor, 'medium' for a receiver of unknown type in a module that uses torch
    (the sync-prone method name is the evidence), None for host data or another type."""
    k = ctx.kind(e)
    if k in DEVICE:
        return "high"
    if k is None and ctx.mod.uses_torch and not ctx.typer.host_only and not (ctx.typer.host_spans and ctx.typer.on_host_path(e)):
        # (a class pinned to the CPU, a path only host tensors take: host data)
        return "medium"
    return None


def _cpu_target(call: ast.Call) -> bool:
    for a in list(call.args[:1]) + [kw.value for kw in call.keywords if kw.arg == "device"]:
        if isinstance(a, ast.Constant) and a.value == "cpu":
            return True
        if isinstance(a, ast.Call) and a.args and isinstance(a.args[0], ast.Constant) and a.args[0].value == "cpu":
            return True
    return False


def _fix_for(name: str) -> str:
    if name == "repeat_interleave":
        return "pass `output_size=` (the known total) so no sync is needed"
    if name in ("unique", "unique_consecutive"):
        return "count with `torch.bincount(x, minlength=n)` or a one-hot sum, which have fixed shapes"
    return _NONZERO_FIX


@check(ast.Call)
def sync_calls(ctx, node: ast.Call):
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in _SYNC_METHODS and not receiver_is_module(ctx, f):
        _method(ctx, node, f)
        return
    if isinstance(f, ast.Attribute) and f.attr == "format" and isinstance(f.value, ast.Constant) \
            and isinstance(f.value.value, str):  # "kl {}".format(kl): str.format of a tensor, like an f-string
        if any(_dev(ctx, a) for a in list(node.args) + [kw.value for kw in node.keywords]):
            ctx.report("PK105", node, what="`str.format` of a tensor")
        return
    q = ctx.qual(f)
    if not q:
        return
    if q in _WARP_SYNCS:
        ctx.report("PK111", node, what=f"`{q.replace('warp.', 'wp.')}()`")
    elif q in _TORCH_SYNCS:
        ctx.report("PK110", node, what=f"`{q}()`")
    elif q.startswith("torch."):
        _torch_fn(ctx, node, q)
    elif isinstance(f, ast.Name) and f.id not in ctx.mod.aliases:
        _builtin(ctx, node, f.id)
    elif q.startswith("math.") and any(_dev(ctx, a) for a in node.args):
        ctx.report("PK104", node, what=f"`{q}()` of a tensor")
    elif q.startswith("wandb.log") and node.args and isinstance(node.args[0], ast.Dict):
        if any(v is not None and _dev(ctx, v) for v in node.args[0].values):
            ctx.report("PK105", node, what="`wandb.log` of a tensor")


def _method(ctx, node: ast.Call, f: ast.Attribute):
    m = f.attr
    recv = f.value
    k = ctx.kind(recv)
    if m == "copy_":
        _copy_into_host(ctx, node, k)
        return
    if k in HOSTISH and m not in ("to", "cuda"):
        return
    conf = "high" if k == TDICT and m in ("cpu", "to") else _confidence(ctx, recv)
    if conf is None and k is None and m == "cpu" and not node.args and not ctx.typer.host_only \
            and not (ctx.typer.host_spans and ctx.typer.on_host_path(node)):
        conf = "medium"  # `.cpu()` is a tensor's (NumPy has none), in a module that gets tensors from a library
        # without importing torch itself (imitation's `samples.observations.cpu()` of an SB3 replay sample)
    if m == "item":
        if conf:
            ctx.report("PK101", node, confidence=conf)
    elif m in ("cpu", "tolist"):
        if k == WARP:
            return
        if m == "cpu" and is_true(kwarg(node, "non_blocking")):
            return
        if conf and not (m == "tolist" and k == TDICT):
            ctx.report("PK102", node, what=f"`.{m}()`", confidence=conf)
    elif m == "numpy":
        # a torch tensor's .numpy() raises on a CUDA tensor (`.cpu()` first is the copy): no sync of its own, but
        # `.numpy(force=True)` copies it to the host first
        if is_true(kwarg(node, "force")) and k != WARP:
            if conf:
                ctx.report("PK102", node, what="`.numpy(force=True)`", confidence=conf)
        elif k == WARP or (k is None and ctx.mod.uses_warp and not ctx.mod.uses_torch):
            ctx.report("PK112", node, what="numpy")
        elif k is None and ctx.mod.uses_warp:
            ctx.report("PK112", node, what="numpy", confidence="medium")  # a Warp array or a torch tensor
    elif m == "list":
        if k == WARP:
            ctx.report("PK112", node, what="list")
    elif m == "to":
        non_blocking = is_true(kwarg(node, "non_blocking"))
        if conf and _cpu_target(node) and not non_blocking:
            ctx.report("PK102", node, what="`.to('cpu')`", confidence=conf)
        elif conf and not non_blocking and _host_device_of(ctx, node):
            # `next_value.to(reward.device)` with `reward` a host tensor (a CPU replay buffer's batch): to the host
            ctx.report("PK102", node, what="`.to(x.device)` of a host tensor `x`", confidence=conf)
        elif k == CPU and not non_blocking and not _cpu_target(node) and ctx.kind(node) in DEVICE:
            ctx.report("PK109", node, what="`.to(device)` of a host tensor")
    elif m == "cuda":
        if k == CPU and not is_true(kwarg(node, "non_blocking")):
            ctx.report("PK109", node, what="`.cuda()` of a host tensor")
    elif m == "synchronize":
        q = ctx.qual(f) or ""
        if q.startswith("warp."):
            ctx.report("PK111", node, what=f"`{q.replace('warp.', 'wp.')}()`")
        else:
            ctx.report("PK110", node, what=f"`{_short(f)}()`")
    elif m in ("nonzero", "argwhere", "unique", "unique_consecutive", "masked_select"):
        if conf and k != TDICT:
            ctx.report("PK106", node, what=f"`.{m}()`", fix=_fix_for(m), confidence=conf)
    elif m == "repeat_interleave":
        if k in DEVICE and kwarg(node, "output_size") is None:
            reps = node.args[0] if node.args else kwarg(node, "repeats")
            if reps is not None and _dev(ctx, reps):
                ctx.report("PK106", node, what="`.repeat_interleave()` with tensor repeats", fix=_fix_for(m))
    elif m in ("equal", "allclose"):
        if k in DEVICE:
            ctx.report("PK104", node, what=f"`.{m}()`")
    elif m in ("add_scalar", "add_scalars", "add_histogram"):
        if any(_dev(ctx, a) for a in node.args[1:]):
            ctx.report("PK105", node, what=f"`{m}` of a tensor")
    else:  # logger.info(...)
        base = recv.id if isinstance(recv, ast.Name) else recv.attr if isinstance(recv, ast.Attribute) else ""
        if base in _LOGGER_NAMES and any(_dev(ctx, a) for a in node.args):
            ctx.report("PK105", node, what=f"`{base}.{m}` of a tensor")


def _host_device_of(ctx, node: ast.Call) -> bool:
    """``.to(x.device)`` / ``.to(device=x.device)`` where ``x`` is a host tensor."""
    for a in list(node.args[:1]) + [kw.value for kw in node.keywords if kw.arg == "device"]:
        if isinstance(a, ast.Attribute) and a.attr == "device" and ctx.kind(a.value) == CPU \
                and ctx.typer.made_here(a.value):
            return True
    return False


def _copy_into_host(ctx, node: ast.Call, k):
    """``cpu_buf.copy_(t)``: a device tensor copied into a host tensor, a blocking device-to-host copy (with
    ``non_blocking=True`` into pinned memory it is not)."""
    nb = kwarg(node, "non_blocking") if len(node.args) < 2 else node.args[1]
    if k not in DEVICE and k != CPU or not node.args or (
            nb is not None and not (isinstance(nb, ast.Constant) and nb.value is False)):
        return  # non_blocking=True, or a flag (`non_blocking=on_cuda`): asynchronous where it matters
    src = node.args[0]
    if k in DEVICE:  # `gpu_buf.copy_(host_t)`: a blocking copy from pageable host memory
        if ctx.kind(src) == CPU and not _device_scope(ctx) and not _default_device_framework(ctx.mod) \
                and isinstance(node.func.value, (ast.Name, ast.Attribute)):
            ctx.report("PK109", node, what="`.copy_()` of a host tensor into a GPU tensor")
        return
    sk = ctx.kind(src)
    if sk in DEVICE:
        conf = "high"
    elif sk is None and ctx.mod.uses_torch and not _in_device_scope(ctx, node):
        conf = "medium"  # what is copied into a host buffer is likely what lives elsewhere: device data
    else:
        return
    ctx.report("PK102", node, what="`.copy_()` of a GPU tensor into a CPU tensor", confidence=conf)


def _short(expr) -> str:
    if isinstance(expr, ast.Attribute):
        inner = _short(expr.value)
        return f"{inner}.{expr.attr}" if inner else expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Call):
        return _short(expr.func) + "()"
    return ""


def _torch_fn(ctx, node: ast.Call, q: str):
    name = q.rsplit(".", 1)[-1]
    if name in ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"):
        ctx.report("PK106", node, what=f"`torch.{name}`", fix=_fix_for(name))
    elif name == "where" and len(node.args) == 1 and not node.keywords:
        ctx.report("PK106", node, what="one-argument `torch.where(cond)`", fix=_NONZERO_FIX)
    elif name == "repeat_interleave" and kwarg(node, "output_size") is None:
        reps = node.args[1] if len(node.args) > 1 else kwarg(node, "repeats")
        if (len(node.args) == 1 and reps is None) or (reps is not None and _dev(ctx, reps)):
            ctx.report("PK106", node, what="`torch.repeat_interleave` with tensor repeats", fix=_fix_for(name))
    elif name in ("equal", "allclose", "is_nonzero"):
        ctx.report("PK104", node, what=f"`torch.{name}`")
    elif name in ("tensor", "as_tensor"):
        dev = kwarg(node, "device")
        if dev is None:
            # `th.as_tensor(array, **kwargs)` in a converter that hot callers give `device=` (imitation's
            # `safe_to_tensor(x, device=d)`): the device comes through the keyword arguments; inside `with
            # fabric.device:` / `with torch.device(d):` the factory makes its tensor on d
            if not (any(kw.arg is None for kw in node.keywords) and passed_device(ctx.mod, ctx.unit)
                    or _in_device_scope(ctx, node)):
                return
        elif isinstance(dev, ast.Constant) and dev.value in ("cpu", None) or ctx.typer.host_only:
            return  # (`device=self.device` in a class pinned to the CPU: no copy to a device)
        if node.args and _dev(ctx, node.args[0]) and not _hinted_param(ctx, node.args[0], any_path=True):
            return  # already on the device
        if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) and not node.args[0].elts:
            return  # torch.tensor([], device=d): nothing to copy (no sync, measured on an H200)
        ctx.report("PK109", node, what=f"`torch.{name}(..., device=...)` from host data")


def _hinted_param(ctx, e, annotated_only=False, any_path=False) -> bool:
    """A parameter (as passed) declared as either a tensor or host data (``np.ndarray | torch.Tensor``), or not
    annotated (typed from what its callers pass): ``torch.as_tensor(masks, device=d)`` converts because some
    callers pass host data, though one passes a tensor. ``any_path``: the parameter as passed reaches ``e`` on some
    path (``if isinstance(array, np.ndarray): array = array.copy()`` rebinds it on the other)."""
    if not isinstance(e, ast.Name) or not isinstance(ctx.unit.node, FUNC_DEFS):
        return False
    a = ctx.unit.node.args
    if annotated_only and passed_kind(ctx.mod, ctx.unit, e.id) in DEVICE:
        return False  # every hot call passes a device tensor
    return any(p.arg == e.id and (p.annotation is None and not annotated_only
                                  or p.annotation is not None and mixed_union(ctx.mod, p.annotation))
               for p in a.posonlyargs + a.args + a.kwonlyargs) \
        and (any if any_path else all)(
            b[0] == (0, 0) for b in ctx.typer._reaching(ctx.typer.binds.get(e.id, []), (e.lineno, e.col_offset)))


def _builtin(ctx, node: ast.Call, name: str):
    if name in ("bool",):
        if node.args and _dev(ctx, node.args[0]):
            ctx.report("PK103", node, what="`bool()` of a tensor")
    elif name in ("float", "int", "complex"):
        if node.args and _dev(ctx, node.args[0]):
            ctx.report("PK104", node, what=f"`{name}()` of a tensor")
    elif name in ("max", "min") and node.args and not node.keywords:
        if any(_dev(ctx, a) for a in node.args):  # max(0, t) compares the tensor in Python: its truth value
            ctx.report("PK104", node, what=f"`{name}()` of a tensor")
    elif name == "print":
        for a in node.args:
            if _dev(ctx, a):
                ctx.report("PK105", a, what="`print` of a tensor")
    elif name in ("str", "repr", "format"):
        if node.args and _dev(ctx, node.args[0]):
            ctx.report("PK105", node, what=f"`{name}()` of a tensor")


_TRUTH_WHAT = {ast.If: "`if` on a tensor", ast.While: "`while` on a tensor (a sync on every iteration)",
               ast.Assert: "`assert` on a tensor", ast.IfExp: "a conditional expression on a tensor"}


def _truth(ctx, e):
    """Confidence that Python's truth test of ``e`` reads a device tensor: 'high', 'medium' (``x.any()`` /
    ``x.all()`` on a receiver of unknown type in a torch module) or None."""
    if isinstance(e, ast.BoolOp):  # tested as a whole: every operand's truth is read, the last one's too
        return _best(_truth(ctx, v) for v in e.values)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return _truth(ctx, e.operand)
    if _dev(ctx, e):
        if ctx.typer.guessed_flag(e):
            # `if done or reset:` on names typed tensors by a guess alone (their names, an env of unknown type): a
            # batched mask's truth value raises, so code that tests one whole holds a Python flag (a gym step's)
            return None
        return _FLAG if _maybe_flag(ctx, e) else "high"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("any", "all") \
            and not e.args and not receiver_is_module(ctx, e.func):
        if ctx.kind(e.func.value) is None and ctx.mod.uses_torch and not ctx.typer.host_only:
            return "medium"
    return None


def _maybe_flag(ctx, e) -> bool:
    """A bare ``self.attr`` / parameter whose truth test may be a None or flag check: the attribute is also set to
    None / a Python constant, or declared ``Optional[Tensor]``; the parameter is ``Optional`` or defaults to
    None (``if self.logstd:`` meaning ``is not None``; a tensor there syncs only if it is one)."""
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == ctx.unit.self_name \
            and ctx.unit.self_name:
        return flag_attr(ctx.mod, ctx.unit.cls, e.attr)
    if isinstance(e, ast.Name) and isinstance(ctx.unit.node, FUNC_DEFS):
        reach = ctx.typer._reaching(ctx.typer.binds.get(e.id, []), (e.lineno, e.col_offset))
        if not reach or any(b[0] != (0, 0) for b in reach):
            return False
        a = ctx.unit.node.args
        pos = a.posonlyargs + a.args
        defaults = dict(zip([p.arg for p in pos][len(pos) - len(a.defaults):], a.defaults))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        for p in pos + a.kwonlyargs:
            if p.arg == e.id:
                d = defaults.get(p.arg)
                return (isinstance(d, ast.Constant) and d.value is None) or (
                    p.annotation is not None and optional(ctx.mod, p.annotation))
    return False


_FLAG = "flag"  # _truth: a device tensor's truth test that may be a None / flag check: medium, never promoted


def _best(confs):
    confs = set(confs)
    return next((c for c in ("high", "medium", _FLAG) if c in confs), None)


def _report_truth(ctx, node, conf, what):
    if conf:
        ctx.report("PK103", node, what=what, confidence="medium" if conf == _FLAG else conf, promote=conf != _FLAG)


def _truth_sites(ctx, e) -> list:
    """[(operand, confidence)]: the operands of ``e``'s ``and`` / ``or`` / ``not`` whose truth test reads a tensor,
    each one its own sync, reported where it is written (a multi-line ``assert (a == b).all() and (c == 0).all()``
    or ``if x.dim() == 2 and torch.all(x >= 0)``: one finding per line, not only at the first operand's)."""
    if isinstance(e, ast.BoolOp):
        return [s for v in e.values for s in _truth_sites(ctx, v)]
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return _truth_sites(ctx, e.operand)
    conf = _truth(ctx, e)
    return [(e, conf)] if conf else []


def _report_truth_sites(ctx, e, what):
    for operand, conf in _truth_sites(ctx, e):
        _report_truth(ctx, operand, conf, what)


@check(ast.If, ast.While, ast.Assert, ast.IfExp)
def truth_tests(ctx, node):
    _report_truth_sites(ctx, node.test, _TRUTH_WHAT[type(node)])


@check(ast.comprehension)
def comprehension_ifs(ctx, node):
    for cond in node.ifs:
        _report_truth_sites(ctx, cond, "a comprehension `if` on a tensor")


@check(ast.BoolOp)
def bool_ops(ctx, node):
    """``a or b`` on tensors: one finding per line, however many operands are tensors."""
    op = "and" if isinstance(node.op, ast.And) else "or"
    for v in node.values[:-1]:  # the last operand is returned, not tested
        _report_truth_sites(ctx, v, f"`{op}` on a tensor")


@check(ast.UnaryOp)
def not_op(ctx, node):
    if isinstance(node.op, ast.Not):
        _report_truth(ctx, node.operand, _truth(ctx, node.operand), "`not` of a tensor")


@check(ast.FormattedValue)
def fstring_values(ctx, node):
    if _dev(ctx, node.value):
        ctx.report("PK105", node.value, what="an f-string of a tensor")


@check(ast.BinOp)
def percent_format(ctx, node):
    if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        vals = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        if any(_dev(ctx, v) for v in vals):
            ctx.report("PK105", node, what="`%`-formatting a tensor")


def _is_mask(ctx, e) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Invert):
        return ctx.kind(e.operand) in DEVICE  # `x[~mask]`: `~` of an index is a mask's negation
    k = ctx.kind(e)
    if k == BOOL:
        return True
    if k == TENSOR:
        name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else ""
        return bool(name) and is_mask_name(name)
    return False


def _index_parts(sl):
    return sl.elts if isinstance(sl, ast.Tuple) else [sl]


@check(ast.Subscript)
def subscripts(ctx, node: ast.Subscript):
    if ctx.kind(node.value) not in DEVICE:
        return
    parts = _index_parts(node.slice)
    if any(isinstance(p, ast.List) for p in parts):
        ctx.report("PK108", node)
        return
    if isinstance(node.ctx, ast.Load) and any(_is_mask(ctx, p) for p in parts):
        ctx.report("PK107", node)


@check(ast.AugAssign)
def masked_augassign(ctx, node: ast.AugAssign):
    t = node.target
    if isinstance(t, ast.Subscript) and ctx.kind(t.value) in DEVICE:
        if any(_is_mask(ctx, p) for p in _index_parts(t.slice)):
            ctx.report("PK107", t)


def _device_scope_spans(ctx) -> list:
    """(first, last line) of the unit's ``with torch.device(d):`` / ``with fabric.device:`` blocks (not
    ``torch.device("cpu")``): factories without ``device=`` in them allocate on ``d``."""
    unit = ctx.unit
    spans = unit.__dict__.get("_device_scope_spans")
    if spans is None:
        spans = []
        for n in unit_nodes(unit):
            if isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    c = item.context_expr
                    f = c.func if isinstance(c, ast.Call) else c
                    if isinstance(f, ast.Attribute) and f.attr == "device" or isinstance(f, ast.Name) and f.id == "device":
                        if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Constant) \
                                and c.args[0].value == "cpu":
                            continue
                        spans.append((n.body[0].lineno, n.end_lineno))
        unit._device_scope_spans = spans
    return spans


def _device_scope(ctx) -> bool:
    """The unit has a ``with torch.device(d):`` / ``with fabric.device:`` block: factories without ``device=`` in it
    allocate on ``d`` (ManiSkill's ``_initialize_episode``), so a tensor typed CPU there may be on the GPU."""
    return bool(_device_scope_spans(ctx))


def _in_device_scope(ctx, node) -> bool:
    return any(a <= node.lineno <= b for a, b in _device_scope_spans(ctx))


def _of_host_tensors(ctx, v) -> bool:
    """Computed on the host though typed a device tensor: a call whose arguments are host data, none a device tensor
    (``self.probability(th.from_numpy(a), ...)``, typed by the callee's annotation), or arithmetic with a CPU tensor
    operand (``value[i] + delta[i]`` with ``value = v.to("cpu")``: torch does not mix devices but for 0-dim ones)."""
    if isinstance(v, ast.BinOp):
        return any(ctx.kind(x) == CPU or _of_host_tensors(ctx, x) for x in (v.left, v.right))
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and ctx.kind(v.func.value) in DEVICE:
        return False  # a device tensor's method: `out.view(shape)`
    kinds = [ctx.kind(a) for a in list(v.args) + [kw.value for kw in v.keywords]]
    return any(k in (CPU, NDARRAY) for k in kinds) and not any(k in DEVICE for k in kinds)


def _python_value(ctx, v) -> bool:
    """A Python number (or other host data) written into a tensor: copied to the device on the host's time."""
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
        v = v.operand
    if isinstance(v, ast.Constant):
        return isinstance(v.value, (int, float, bool)) and v.value is not None
    k = ctx.kind(v)
    if k == NDARRAY:  # a host env's reward / flag (a NumPy scalar or array): copied to the device the same way
        return isinstance(v, ast.Name)
    return k == HOST and isinstance(v, (ast.Name, ast.Attribute, ast.Call, ast.BinOp))


def _from_nonzero(ctx, p) -> bool:
    """``ids`` bound in this function from ``x.nonzero()`` / ``torch.where(mask)`` / ``argwhere``."""
    if not isinstance(p, ast.Name):
        return False
    cache = ctx.mod.__dict__.setdefault("_pk113_nz", {})
    names = cache.get(ctx.unit)
    if names is None:
        names = set()
        for n in unit_nodes(ctx.unit):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                for c in ast.walk(n.value):
                    if isinstance(c, ast.Call):
                        f = c.func
                        m = f.attr if isinstance(f, ast.Attribute) else ""
                        if m in ("nonzero", "argwhere") or (m == "where" and len(c.args) == 1):
                            names.add(n.targets[0].id)
        cache[ctx.unit] = names
    return p.id in names


def _int_index(ctx, p) -> bool:
    if isinstance(p, ast.Constant):
        return isinstance(p.value, int) and not isinstance(p.value, bool)
    return isinstance(p, (ast.Name, ast.Attribute)) and ctx.kind(p) == HOST


def _default_device_framework(mod) -> bool:
    """A module of a framework whose initialisation sets torch's default device for the process, wherever it is
    called (Genesis' ``gs.init``: a library on Genesis never calls it, its user's script does): its factories without
    ``device=`` may make device tensors."""
    return "genesis" in getattr(mod, "_roots", ())


@check(ast.Assign)
def index_writes(ctx, node: ast.Assign):
    for t in node.targets:
        if isinstance(t, ast.Subscript) and ctx.kind(t.value) == CPU and isinstance(node.value, (ast.Call, ast.BinOp)) \
                and _dev(ctx, node.value) and not _of_host_tensors(ctx, node.value) and not _device_scope(ctx):
            # imitation's `probs = th.empty(n)` then `probs[i] = self.probability(r1, r2)` per fragment pair: a result
            # computed here (a copied slice or name may be typed a device tensor on weaker evidence)
            ctx.report("PK102", t, what="writing a GPU tensor into a CPU tensor (`cpu_buf[i] = t`)")
            continue
        if not isinstance(t, ast.Subscript) or ctx.kind(t.value) not in DEVICE:
            continue
        if isinstance(node.value, (ast.Call, ast.Name, ast.Attribute)) and isinstance(t.value, (ast.Name, ast.Attribute)) \
                and ctx.kind(node.value) == CPU and not _device_scope(ctx) and not _default_device_framework(ctx.mod):
            # `self.obs[t] = torch.as_tensor(next_obs)`, an explorer's host random action stored into the device
            # rollout: a blocking copy from pageable host memory, behind the queued kernels (into a buffer the code
            # names: an item of a TensorDict may live on the host with its dict)
            ctx.report("PK109", t, what="writing a host tensor into a GPU tensor (`gpu_buf[i] = host_t`)")
            continue
        parts = _index_parts(t.slice)
        masks = [p for p in parts if _is_mask(ctx, p)]
        if masks:
            if ctx.kind(node.value) in DEVICE:
                ctx.report("PK113", t, what="writing a tensor through a boolean mask (`x[mask] = y`)",
                           fix="use `x.copy_(torch.where(mask, y, x))` (or `masked_scatter_` when y is packed)")
            continue
        if not _python_value(ctx, node.value):
            continue
        # ids = mask.nonzero() is an index tensor too: the write is its own sync (the profiler counts both)
        index_tensor = any(ctx.kind(p) == TENSOR or _from_nonzero(ctx, p) for p in parts)
        if index_tensor:
            ctx.report("PK113", t, what="writing a Python scalar through an index tensor (`x[idx] = 0.0`)",
                       fix="use `x.index_fill_(dim, idx, value)`, or write a 0-dim device tensor made once")
        elif not isinstance(t.slice, ast.Tuple) and _int_index(ctx, t.slice):
            ctx.report("PK113", t, what="writing a Python scalar at an integer index (`x[5] = 0.0`)",
                       fix="use `x[5:6].fill_(value)` (a slice is a view) or write a 0-dim device tensor made once")


# -- a project function that reads its argument on the host -----------------------------------------------------

_HOST_READS = {"cpu": "PK102", "tolist": "PK102", "item": "PK104"}  # not .numpy(): it raises on a CUDA tensor
_READ_TEXT = re.compile(r"\.(cpu|tolist|item)\(")


def _read_root(recv):
    """``x`` of ``x.detach().cpu()`` / ``x.data.cpu()`` / ``x.float().item()``: the name a chain of tensor
    methods starts from, else None."""
    while True:
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and not recv.args:
            recv = recv.func.value
        elif isinstance(recv, ast.Attribute) and recv.attr == "data":
            recv = recv.value
        else:
            return recv if isinstance(recv, ast.Name) else None


def host_reads(unit) -> dict:
    """{parameter: sync-prone method} for the parameters a converter copies to the host in its tensor branch
    (``to_numpy(x)``: ``if isinstance(x, torch.Tensor): return x.detach().cpu().numpy()``; ``to_scalar(v)``:
    ``v.item()``): whether a call syncs depends on the argument's type, which only the call site shows. A
    function that reads its parameter whatever it is has its own finding."""
    out = unit.__dict__.get("_host_reads")
    if out is not None:
        return out
    out = {}
    unit._host_reads = out
    if not isinstance(unit.node, FUNC_DEFS) or unit.kernel or unit.mod is None:
        return out
    args = unit.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {unit.self_name}
    typer = None
    failing = error_path(unit)  # `raise ValueError(f"{x.item()}")`: only when it fails
    for n in unit_nodes(unit):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _HOST_READS):
            continue
        if id(n) in failing:
            continue
        if n.args or kwarg(n, "non_blocking") is not None:
            continue
        root = _read_root(n.func.value)
        if root is None or root.id not in params or root.id in out:
            continue
        typer = typer or typer_for(unit.mod, unit)
        pos = (root.lineno, root.col_offset)
        if not any(r[0] == root.id and r[1] <= pos <= r[2] and r[3] in DEVICE for r in typer.refine) \
                and not _one_line_reader(unit, n):
            continue  # read whatever the argument is: the callee's own finding says it
        out[root.id] = n.func.attr
    return out


def _one_line_reader(unit, read) -> bool:
    """``def _t2n(x): return x.detach().cpu().numpy()``: a helper whose whole body returns its parameter converted to
    host data (NumPy, a list). It syncs wherever it is called with a device tensor, and the call site (a runner's
    ``np.split(_t2n(values), n)``) is where the per-step read shows: reported there too, besides its own line."""
    body = [st for st in unit.node.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if not (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None):
        return False
    v = body[0].value  # a conversion to host data: `.cpu().numpy()` / `.tolist()` (not a compute helper's `.item()`)
    return read.func.attr in ("cpu", "tolist") and isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr in ("numpy", "tolist") and any(x is read for x in ast.walk(v))


def _callee_names(ctx) -> set:
    """Names of the project's functions whose code has a ``.cpu()``/``.tolist()``/``.item()`` call
    (a cheap filter before resolving a call)."""
    holder = ctx.mod.project if ctx.mod.project is not None else ctx.mod
    names = holder.__dict__.get("_host_read_names")
    if names is None:
        names = set()
        for m in (holder.mods if ctx.mod.project is not None else [ctx.mod]):
            if _READ_TEXT.search(m.text):
                names |= {u.name for u in m.units_matching(_READ_TEXT) if not u.is_module}
        holder._host_read_names = names
    return names


@check(ast.Call)
def host_reading_calls(ctx, node: ast.Call):
    """``to_numpy(actions)``: a call of a project function that copies that argument to the host."""
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name is None or name in _SYNC_METHODS or name not in _callee_names(ctx):
        return
    targets = resolve_call(ctx.mod, ctx.unit, node)
    if len(targets) != 1 or targets[0] is ctx.unit:
        return
    callee = targets[0]
    reads = host_reads(callee)
    if not reads:
        return
    args = callee.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if callee.self_name and isinstance(f, ast.Attribute) and params[:1] == [callee.self_name]:
        params = params[1:]
    given = list(zip(params, node.args)) + [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
    for param, value in given:
        method = reads.get(param)
        if method is None or isinstance(value, ast.Starred):
            continue
        conf = _confidence(ctx, value)
        if conf is None:
            continue
        if conf == "high" and _hinted_param(ctx, value, annotated_only=True):
            conf = "medium"  # `mask: np.ndarray | torch.Tensor`: declared either, the converter checks which
        rule = _HOST_READS[method]
        what = f"`{name}()` (its `.{method}()` of `{param}`)"
        ctx.report(rule, node, what=what, confidence=conf, promote=False)
        return
