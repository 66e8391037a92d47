"""``perfkit probe`` and the machine profile cache."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.pricing.machine_profile import SCHEMA, cache_path, read_profile


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_probe_quick_writes_a_valid_profile_then_hits_the_cache(tmp_path, cache):
    out = tmp_path / "x.json"
    r = CliRunner().invoke(main, ["probe", "--quick", "-o", str(out)])
    assert r.exit_code == 0, r.output
    prof = read_profile(out)
    assert prof["schema"] == SCHEMA and prof["quick"] is True
    assert set(prof["probes"]) == {"sync", "launch", "allocator", "copies", "markers", "interop", "pyloop"}
    assert prof["costs"]["pyloop_iteration_ms"] > 0 and prof["cost_sources"]["pyloop_iteration_ms"] == \
        "pyloop.per_env_iteration_us"
    assert "pyloop" in r.output and "per_env_iteration_us" in r.output  # the table
    cached = cache_path(prof["key"])
    assert json.loads(cached.read_text())["costs"] == prof["costs"]

    # second call: nothing re-measured, same numbers
    r2 = CliRunner().invoke(main, ["probe", "--quick", "--only", "pyloop,markers", "-o", str(tmp_path / "y.json")])
    assert r2.exit_code == 0, r2.output
    assert "reused from cache: pyloop, markers" in r2.output
    assert read_profile(tmp_path / "y.json")["probes"]["pyloop"] == prof["probes"]["pyloop"]


def test_refresh_measures_again_and_full_replaces_quick(cache):
    from perfkit.pricing.machine_profile import get_profile

    prof, measured, reused = get_profile(quick=True, only=["markers"])
    assert measured == ["markers"] and reused == []
    prof2, measured, reused = get_profile(quick=True, only=["markers"])
    assert measured == [] and reused == ["markers"] and prof2 == prof
    _, measured, _ = get_profile(quick=True, only=["markers"], refresh=True)
    assert measured == ["markers"]
    # a full measurement is asked for: the cached quick one does not do
    prof3, measured, _ = get_profile(quick=False, only=["markers"])
    assert measured == ["markers"] and prof3["probes"]["markers"]["quick"] is False


def test_unknown_probe_is_a_usage_error(cache):
    r = CliRunner().invoke(main, ["probe", "--only", "sync,nope"])
    assert r.exit_code == 2
    assert "unknown probe 'nope'" in r.output
    assert not cache.exists()  # nothing ran, nothing written


def test_corrupt_cache_is_measured_over(cache):
    from perfkit.pricing.machine_profile import get_profile

    path = cache_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    prof, measured, _ = get_profile(quick=True, only=["markers"])
    assert measured == ["markers"]
    assert read_profile(path)["probes"]["markers"]["status"] in ("ok", "partial")


def test_unwritable_output_is_a_clear_error(tmp_path, cache):
    target = tmp_path / "dir"
    target.mkdir()
    r = CliRunner().invoke(main, ["probe", "--quick", "--only", "markers", "-o", str(target)])
    assert r.exit_code == 2  # click refuses a directory for a file path


def test_titles_name_only_what_is_known():
    from rich.console import Console

    from perfkit.cli.probe import render_table
    from perfkit.pricing.machine_profile import build_profile
    from perfkit.machine import label

    cpu = {"device": "cpu", "driver": None, "cuda": None, "torch": "2.13.0"}
    assert label(cpu) == "cpu, torch 2.13.0"
    gpu = {"device": "NVIDIA H200", "driver": "580.65", "cuda": "13.0", "torch": "2.11.0"}
    assert label(gpu) == "NVIDIA H200, driver 580.65, CUDA 13.0, torch 2.11.0"
    prof = build_profile({"pyloop": {"status": "ok", "per_env_iteration_us": 10.0}})
    assert "None" not in prof["source"]
    console = Console(width=200, record=True)
    console.print(render_table(dict(prof, machine=cpu), ["pyloop"]))
    text = console.export_text()
    assert "perfkit probe: cpu, torch 2.13.0" in text and "None" not in text
