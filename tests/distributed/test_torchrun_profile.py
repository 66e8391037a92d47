"""``torchrun --nproc-per-node 3 -m perfkit profile -o DIR/ script.py`` on the CPU (gloo): a record per
rank with its dist block, the comm segment with calls and waits, DDP's buckets, rank 2 made slow named
as the straggler, one summary on the console, and ``perfkit report`` / ``perfkit compare`` on the ranks."""

from __future__ import annotations

import json

import pytest
from _dist_helpers import SCRIPTS, perfkit, torchrun

from perfkit.analysis.ranks import merge_ranks
from perfkit.record import Run

WORLD = 3
SLOW = 2
SLOW_MS = 25


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp")
    proc = torchrun(WORLD, ["-m", "perfkit", "profile", "-o", "records/", str(SCRIPTS / "dp_toy.py"), "--steps", "24",
                            "--slow-rank", str(SLOW), "--slow-ms", str(SLOW_MS), "--ddp", "--sync-in-comm", "--destroy"],
                    cwd=out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_each_rank_writes_its_own_record_with_its_dist_block(job):
    out, _ = job
    assert sorted(p.name for p in (out / "records").iterdir()) == [f"run.rank{r}.json" for r in range(WORLD)]
    run_ids = set()
    for r in range(WORLD):
        run = Run.load(out / "records" / f"run.rank{r}.json")
        d = run.dist
        assert (d["rank"], d["local_rank"], d["world_size"], d["local_world_size"], d["node"]) == (r, r, WORLD, WORLD, 0)
        assert (d["backend"], d["device"], d["launcher"]) == ("gloo", "cpu", "torchrun")
        run_ids.add(d["run_id"])
        assert run.status == "complete" and run.steps > 10 and run.num_envs == 32
    assert len(run_ids) == 1 and None not in run_ids


def test_comm_segment_calls_waits_and_ddp(job):
    out, _ = job
    for r in range(WORLD):
        run = Run.load(out / "records" / f"run.rank{r}.json")
        assert run.segments["comm"].cpu_ms_per_step > 0
        comm = run.dist["comm"]
        t = comm["timed_steps"]
        ar = comm["ops"]["all_reduce"]
        # per step: the stat all_reduce, the async one (waited on), the one inside perfkit.segment("comm")
        assert ar["calls_per_step"] == 3 and ar["async_per_step"] == 1 == ar["waits_per_step"]
        assert comm["ops"]["barrier"]["calls"] == {"teardown": 1}
        ddp = run.dist["ddp"]
        assert ddp["modules"] == 1 and ddp["buckets"] >= 1 and ddp["forwards_per_step"] > 0
        assert ddp["comm_ms_per_backward"] >= 0
        # the wait is no sync; the .item() inside comm is one, in segment comm
        assert not [f for f in run.findings if "wait" in f.op.lower()]
        assert [(f.op, f.segment) for f in run.findings if f.kind == "sync"] == [(".item()", "comm")]


def test_the_slow_rank_is_the_straggler(job):
    out, _ = job
    runs = [Run.load(out / "records" / f"run.rank{r}.json") for r in range(WORLD)]
    s = merge_ranks(runs)
    assert s.straggler == SLOW and not s.balanced and s.imbalance > 0.5
    assert s.total_sps == pytest.approx(sum(r.sps for r in runs))
    fast = [r for r in s.ranks if r.rank != SLOW]
    slow = s.row(SLOW)
    # the others wait for it inside the collectives: most of its sleep shows as their comm time
    assert all(r.comm_ms - slow.comm_ms > 0.6 * SLOW_MS for r in fast)
    assert slow.busy_ms > SLOW_MS and all(r.busy_ms < slow.busy_ms - 0.6 * SLOW_MS for r in fast)


def test_console_rank_0_summarizes_every_rank_says_one_line(job):
    _, proc = job
    err = proc.stderr
    assert err.count("calls/step: times per steady-state step") == 1  # one full summary: rank 0's
    lines = [ln for ln in err.splitlines() if ln.startswith("perfkit rank ")]
    assert sorted(ln.split(":")[0] for ln in lines) == [f"perfkit rank {r}/{WORLD} [gloo, cpu]" for r in range(WORLD)]
    assert all(f"records/run.rank{ln.split()[2].split('/')[0]}.json" in ln for ln in lines)
    assert err.count("each writes its own record") == 1  # rank 0 says it, once


def test_report_merges_the_ranks_in_html_and_markdown(job):
    out, _ = job
    recs = [f"records/run.rank{r}.json" for r in range(WORLD)]
    proc = perfkit(["report", *recs, "-o", "rep"], cwd=out)
    assert proc.returncode == 0, proc.stderr
    md = (out / "rep" / "report.md").read_text()
    html = (out / "rep" / "index.html").read_text()
    assert f"## Data-parallel job: dp\\_toy.py, {WORLD} of {WORLD} ranks (gloo)" in md
    assert f"straggler: rank {SLOW}" in md and "### Collectives per rank" in md and "| all\\_reduce | 2 |" in md
    assert f"Data-parallel job: dp_toy.py, {WORLD} of {WORLD} ranks (gloo)" in html
    assert html.count('class="knee"><td class="num">2</td>') == 1  # the straggler's row is marked


def test_compare_reads_per_rank_records(job):
    out, _ = job
    proc = perfkit(["compare", "records/run.rank0.json", "records/run.rank1.json"], cwd=out)
    assert proc.returncode == 0, proc.stderr
    assert "comm" in proc.stdout


def test_report_single_must_be_a_run(job, tmp_path):
    out, _ = job
    proc = perfkit(["report", "records/run.rank0.json", "--single", str(tmp_path / "none.json"), "-o", "rep2"], cwd=out)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: ") and "none.json" in proc.stderr
    json.loads((out / "records" / "run.rank0.json").read_text())  # untouched


def test_ranks_named_only_by_their_process_group_get_their_own_record(tmp_path):
    import socket
    import subprocess
    import sys

    from _dist_helpers import env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "perfkit", "profile", "-o", "run.json", str(SCRIPTS / "tcp_pg.py"),
                               "--rank", str(r), "--port", str(port)], cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["run.rank0.json", "run.rank1.json"]
    for r in (0, 1):
        d = Run.load(tmp_path / f"run.rank{r}.json").dist
        assert (d["rank"], d["world_size"], d["backend"], d["launcher"]) == (r, 2, "gloo", None)
        assert f"record run.rank{r}.json" in outs[r]
