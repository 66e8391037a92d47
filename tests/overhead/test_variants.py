"""benchmarks/overhead.py --variants: perfkit's parts switched off one at a time in one process (issue 23's
diagnosis by cause), each variant a real session with those ``[tool.perfkit]`` settings."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from perfkit.config import Config

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("_pk_overhead_bench", ROOT / "benchmarks" / "overhead.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_variant_is_a_valid_config_and_the_untimed_ones_sample_nothing():
    bench = _bench()
    for name, settings in bench.VARIANTS.items():
        cfg = Config(**settings)
        assert cfg.sync_source in ("auto", "hooks"), name
    res = bench.measure_sources("torch", 8, "cpu", rounds=1, steps=8, sources=("auto", "hooks-untimed"), warmup=2,
                                warm_steps=40)
    assert set(res["ratio_median"]) == {"auto", "hooks-untimed"}
    assert res["counted"]["hooks-untimed"]["sampled_steps"] == []  # no sampled step in a variant without sampling
    assert res["counted"]["auto"]["sampled_steps"]  # the default samples (its first steady step at least)
    with pytest.raises(ValueError, match="unknown variant"):
        bench.measure_sources("torch", 8, "cpu", rounds=1, steps=2, sources=("no-such",))
