"""``perfkit sweep --gpus 0,1`` keeps a point a single process: run from a shell inside a torchrun job
(RANK, WORLD_SIZE, ... set), each point still writes points/N.json as rank 0 of a world of 1, its dist
block naming the CUDA_VISIBLE_DEVICES its GPU worker set."""

from __future__ import annotations

import os

import pytest
from _dist_helpers import ROOT, SCRIPTS

from perfkit.sweeps.runner import SweepConfig, run_sweep

LAUNCHER = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29999", "TORCHELASTIC_RUN_ID": "outer-job"}


@pytest.mark.parametrize("target", ["script", "factory"])
def test_points_are_rank_0_of_1_on_their_gpu(tmp_path, monkeypatch, target):
    for k, v in LAUNCHER.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.chdir(SCRIPTS)  # a factory target is imported from where the sweep started
    if target == "script":
        cfg = SweepConfig(target=str(SCRIPTS / "sweep_points.py"), num_envs=[4, 8], out_dir=tmp_path, num_envs_arg="--n",
                          warmup_steps=2, gpus=["0", "1"], timeout_s=120)
    else:
        cfg = SweepConfig(target="sweep_points:make", num_envs=[4, 8], out_dir=tmp_path, steps=20, warmup_steps=2,
                          gpus=["0", "1"], timeout_s=120)
    sw = run_sweep(cfg, progress=False)
    assert [p.status for p in sw.points] == ["complete", "complete"], [p.error for p in sw.points]
    assert sorted(p.name for p in (tmp_path / "points").glob("*.json")) == ["4.json", "8.json"]
    for p in sw.points:
        d = sw.runs[p.num_envs].dist
        assert (d["rank"], d["world_size"], d["launcher"], d["run_id"], d["master"]) == (0, 1, None, None, None)
        assert d["visible_devices"] == p.gpu and d["device"] == "cpu"
