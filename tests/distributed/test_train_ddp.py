"""examples/train_ddp.py: two ranks on the CPU (gloo, MuJoCo C) train the same networks whether the
gradients are averaged by one all_reduce or by DDP, print each rank's SPS and rank 0 the total; one rank
without a launcher; perfkit's linter finds nothing in it."""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch.distributed as dist
from _dist_helpers import ROOT, perfkit, torchrun

ARGS = ["--backend", "gloo", "--device", "cpu", "--num-envs", "8", "--iterations", "3", "--num-steps", "8"]
TOTAL = re.compile(r"^total SPS: ([0-9.]+) \(world size 2; per rank ([0-9.]+), ([0-9.]+); "
                   r"weights differ from rank 0's by at most (\S+)\)$", re.M)


def _launch(tmp_path, *extra):
    proc = torchrun(2, [str(ROOT / "examples" / "train_ddp.py"), *ARGS, *extra], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[:4000]
    return proc.stdout


def _iterations(out: str) -> list[str]:
    """Rank 0's metrics per iteration, without the timing."""
    return [re.sub(r"\s+SPS .*$", "", ln) for ln in out.splitlines() if ln.startswith("iter ")]


def test_two_ranks_allreduce_and_ddp_train_alike(tmp_path):
    outs = {sync: _launch(tmp_path, "--sync", sync) for sync in ("allreduce", "ddp")}
    for sync, out in outs.items():
        sps = [float(x) for x in re.findall(r"^SPS: ([0-9.]+)$", out, re.M)]
        m = TOTAL.search(out)
        assert len(sps) == 2 and m, out
        assert sorted(sps) == sorted([float(m.group(2)), float(m.group(3))])
        assert float(m.group(1)) == pytest.approx(sum(sps), abs=0.2)
        assert float(m.group(4)) == 0.0, f"{sync}: the ranks' weights drifted apart"
        assert len(_iterations(out)) == 3 and "world_size=2 dist_backend=gloo" in out
    # the same averaged gradients from the same start: the same learning, whichever way they were averaged
    assert _iterations(outs["allreduce"]) == _iterations(outs["ddp"])


def test_one_rank_without_a_launcher(capsys):
    spec = importlib.util.spec_from_file_location("example_train_ddp", ROOT / "examples" / "train_ddp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--device", "cpu", "--num-envs", "4", "--iterations", "2", "--num-steps", "4"])
    assert not dist.is_initialized()
    out = capsys.readouterr().out
    assert res["per_rank"] == [pytest.approx(res["sps"])] and res["weights_drift"] == 0.0
    assert re.search(r"^SPS: \d+\.\d$", out, re.M) and "total SPS" in out and "world size 1" in out
    with pytest.raises(SystemExit):
        mod.parse_args(["--iterations", "1"])  # no steady iteration to time


def test_lint_is_clean(tmp_path):
    proc = perfkit(["lint", str(ROOT / "examples" / "train_ddp.py")], cwd=tmp_path)
    assert proc.returncode == 0 and "no findings" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
