"""Multi-node on one machine: two torchrun launches on localhost (``--nnodes 2 --node-rank 0/1``, one
static rendezvous), one rank each, the rank on node 1 made slow. The merged report groups the ranks by
node and names the slow node; with node 1's records gone it still reports, naming what is missing."""

from __future__ import annotations

import socket
import subprocess
import sys

from _dist_helpers import LAUNCH_TIMEOUT_S, SCRIPTS, env, perfkit

from perfkit.analysis.ranks import merge_ranks
from perfkit.record import Run


def test_two_nodes_grouped_slow_node_named_and_missing_node_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
               "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(port),
               "-m", "perfkit", "profile", "-q", "-o", "rec/", str(SCRIPTS / "dp_toy.py"), "--steps", "16",
               "--slow-rank", "1", "--slow-ms", "20"]
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=LAUNCH_TIMEOUT_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = [Run.load(tmp_path / "rec" / f"run.rank{r}.json") for r in (0, 1)]
    assert [(r.dist["rank"], r.dist["node"], r.dist["world_size"]) for r in runs] == [(0, 0, 2), (1, 1, 2)]
    s = merge_ranks(runs)
    assert {n: e["ranks"] for n, e in s.nodes.items()} == {0: [0], 1: [1]} and s.slow_node == 1
    proc = perfkit(["report", "rec/run.rank0.json", "rec/run.rank1.json", "-o", "rep"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "2 nodes — node 0" in md and "slow node: 1" in md
    # node 1's records lost: the report still stands, naming the rank and its node
    proc = perfkit(["report", "rec/run.rank0.json", "-o", "rep0"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep0" / "report.md").read_text()
    assert "No record from rank 1." in md and "node 1: ranks - (no record from 1)" in md
    assert "| 1 | 1 | - | - | no record |" in md
