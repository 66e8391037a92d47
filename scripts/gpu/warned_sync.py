"""What a sync reported by the CUDA runtime costs perfkit on this GPU, step by step: inside a session,
a boolean-mask read at a program's line timed with torch's sync detection on (warned, caught, counted
into a scratch sink) and off, the scratch sink's count, perfkit's warning filter and catcher, and
``self_cost._warned_device_sync`` (the record's price). A diagnosis of a GPU test that once read the
price at 0 (reports/h200-2026-12-02/warned-sync-diag.txt).

    python3 scripts/gpu/warned_sync.py
"""
import torch
from perfkit.profile.session import Session
from perfkit.collectors import hub, self_cost
from perfkit.collectors.hub import Sink
with Session() as s:
    torch.zeros(1, device="cuda")
    print("source", hub.installed_sync_source, "mode", torch.cuda.get_sync_debug_mode())
    dev = torch.device("cuda", torch.cuda.current_device())
    t = torch.ones(2, device=dev); m = torch.ones(2, dtype=torch.bool, device=dev)
    read = self_cost._program_call("return t[m]", t=t, m=m)
    # a scratch sink for every sink list (the sync hooks and the catcher report to hub.sync_sinks)
    saved, saved_sync = list(hub.sinks), list(hub.sync_sinks); sink = Sink(); hub.sinks[:] = hub.sync_sinks[:] = [sink]
    try:
        w = self_cost._best(read, 50)
    finally:
        hub.sinks[:] = saved; hub.sync_sinks[:] = saved_sync
    print("warned best", w * 1e6, "sink counts", dict(list(sink.counts.items())[:3]) if hasattr(sink, "counts") else vars(sink).keys())
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(0)
    p = self_cost._best(read, 50)
    torch.cuda.set_sync_debug_mode(prev)
    print("plain best", p * 1e6, "tls depth", hub.tls.depth, "runtime", hub.runtime)
    import warnings
    print("filters0", warnings.filters[0], "showwarnmsg", warnings._showwarnmsg)
    print("device price", self_cost._warned_device_sync(torch))
