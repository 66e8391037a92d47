"""scripts/gpu/tensordict_to.py (does a perfkit session slow TensorDict.to() of on-device data?) on the
CPU: it times each case plainly and inside a session, interleaved, and leaves no hook behind."""

from __future__ import annotations

import pytest
from _overhead_helpers import ROOT, load_script

SCRIPT = ROOT / "scripts" / "gpu" / "tensordict_to.py"


def test_each_case_is_timed_plainly_and_in_a_session_and_the_hooks_go_afterwards():
    pytest.importorskip("tensordict")
    import torch

    mod = load_script(SCRIPT, "tensordict_to_script")
    before = torch.Tensor.to
    res = mod.measure("cpu", 16, rounds=2, calls=20)
    assert torch.Tensor.to is before  # the sessions' hooks were removed
    cases = ("td.to(device)", "td.apply(identity)", "t.to(device)")
    assert set(res["perfkit_over_plain"]) == set(cases)
    for arm in ("plain", "perfkit"):
        assert all(res["median_us"][f"{arm} {c}"] > 0 for c in cases)
    assert not any(k.startswith("perfkit-detection-off") for k in res["median_us"])  # CUDA only
