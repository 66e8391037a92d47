"""Merging per-rank records (pure: synthetic records): the definitions of perfkit.analysis.ranks, grouping
jobs, the 1-GPU baseline, pandas views, the report's section, the record's dist block and rank naming."""

from __future__ import annotations

import json

import pytest

from perfkit.analysis import ranks
from perfkit.analysis.report_model import build_report, fmt_num
from perfkit.dist import launch_info, physical_gpu, rank_record_path
from perfkit.record import RecordError, Run, SegmentStats
from perfkit.renderers import markdown


def rank_run(rank, world=2, step=10.0, comm=2.0, sps=None, gpu_comm=None, run_id="job", num_envs=100, ddp_exposed=None,
             command=("examples/train_ddp.py", "--num-envs", "100"), backend="gloo", node=0, local_world=None):
    """A record of one rank: ``step`` ms per step, ``comm`` ms of it in collectives (host)."""
    r = Run(command=list(command), num_envs=num_envs, steps=50, status="complete")
    r.step_ms = {"mean": step, "p50": step, "p99": step}
    r.sps = sps if sps is not None else num_envs / step * 1e3
    r.segments = {
        "physics": SegmentStats(cpu_ms_per_step=step - comm - 1.0, gpu_ms_per_step=None),
        "comm": SegmentStats(cpu_ms_per_step=comm + 0.5, gpu_ms_per_step=gpu_comm, calls_per_step=2.0),
        "other": SegmentStats(cpu_ms_per_step=0.5),
    }
    r.dist = {"rank": rank, "local_rank": rank, "world_size": world, "backend": backend, "device": "cpu", "node": node,
              "local_world_size": local_world,
              "run_id": run_id, "master": "127.0.0.1:29500",
              "comm": {"timed_steps": 49, "calls_per_step": 2.0, "host_ms_per_step": comm, "call_ms_per_step": comm - 0.1,
                       "wait_ms_per_step": 0.1, "ops": {"all_reduce": {"calls_per_step": 2.0, "bytes_per_step": 4e6,
                                                                        "call_ms_per_step": comm - 0.1, "waits_per_step": 1.0,
                                                                        "wait_ms_per_step": 0.1, "async_per_step": 1.0,
                                                                        "calls": {"steady": 98}}}}}
    if ddp_exposed is not None:
        r.dist["ddp"] = {"exposed_comm_ms_per_step": ddp_exposed}
    return r


def test_straggler_is_the_rank_the_others_wait_for():
    # lock step: equal step times; rank 2 computes 9 ms, the others 4 ms and wait 5 ms more in comm
    runs = [rank_run(0, 3, comm=6.0), rank_run(1, 3, comm=6.0), rank_run(2, 3, comm=1.0, sps=9_900.0)]
    s = ranks.merge_ranks(runs)
    assert [r.busy_ms for r in s.ranks] == [4.0, 4.0, 9.0]
    assert s.straggler == 2 and s.slowest_rank is None  # SPS 1 % apart: no lowest rank named on noise
    assert s.imbalance == pytest.approx(9.0 / (17.0 / 3) - 1)
    assert s.balanced is False
    assert s.total_sps == pytest.approx(10_000 + 10_000 + 9_900)
    assert [r.comm_share for r in s.ranks] == pytest.approx([0.6, 0.6, 0.1])
    assert s.comm_share == pytest.approx((0.6 + 0.6 + 0.1) / 3)
    assert s.comm_ops["all_reduce"][2]["calls_per_step"] == 2.0
    assert s.segments["comm"] == {0: 6.5, 1: 6.5, 2: 1.5}  # the segment table shows segment times
    assert s.scaling_efficiency is None and s.missing == []


def test_balanced_ranks_and_the_threshold():
    s = ranks.merge_ranks([rank_run(0, comm=2.0), rank_run(1, comm=1.6)])
    assert s.imbalance == pytest.approx(8.4 / 8.2 - 1) and s.balanced is True
    assert s.straggler == 1  # still named: the most busy
    s = ranks.merge_ranks([rank_run(0, comm=2.0), rank_run(1, comm=1.0)])
    assert s.imbalance == pytest.approx(9.0 / 8.5 - 1) and s.imbalance < ranks.BALANCED and s.balanced
    s = ranks.merge_ranks([rank_run(0, comm=3.0), rank_run(1, comm=1.0)])
    assert s.imbalance == pytest.approx(9.0 / 8.0 - 1) and s.imbalance > ranks.BALANCED and not s.balanced


def test_scaling_efficiency_against_the_one_gpu_run():
    single = rank_run(0, world=1, step=8.0, comm=0.1)
    s = ranks.merge_ranks([rank_run(0), rank_run(1)], single)
    assert s.single_sps == pytest.approx(12_500)
    assert s.scaling_efficiency == pytest.approx(20_000 / (2 * 12_500))
    single.num_envs = 50
    s = ranks.merge_ranks([rank_run(0), rank_run(1)], single)
    assert any("unlike loads" in n for n in s.notes)


def test_comm_time_prefers_gpu_events_then_host_time_and_adds_ddp():
    r = rank_run(0, comm=2.0)
    assert ranks.comm_ms(r) == (2.0, "host")
    r = rank_run(0, comm=2.0, gpu_comm=3.5)
    assert ranks.comm_ms(r) == (3.5, "gpu")
    r = rank_run(0, comm=2.0, ddp_exposed=0.75)
    assert ranks.comm_ms(r) == (2.75, "host + ddp")
    del r.dist["comm"]
    assert ranks.comm_ms(r) == (2.5 + 0.75, "host + ddp")  # the segment's CPU time when no comm block
    plain = Run(command=["x.py"], steps=5, step_ms={"mean": 3.0})
    assert ranks.comm_ms(plain) == (None, "none")


def test_missing_and_duplicate_ranks():
    s = ranks.merge_ranks([rank_run(0, 4), rank_run(2, 4)])
    assert s.missing == [1, 3] and any("2 of 4 ranks" in n for n in s.notes)
    with pytest.raises(ValueError, match="rank 1 appears twice"):
        ranks.merge_ranks([rank_run(1), rank_run(1)])
    with pytest.raises(ValueError):
        ranks.merge_ranks([])


def test_jobs_are_grouped_by_rendezvous_and_a_repeated_rank_starts_another():
    a = [rank_run(0, run_id="a"), rank_run(1, run_id="a")]
    b = [rank_run(1, run_id="b"), rank_run(0, run_id="b")]
    static = [rank_run(0, run_id="none"), rank_run(1, run_id="none"), rank_run(0, run_id="none"), rank_run(1, run_id="none")]
    single = rank_run(0, world=1)
    entries = [(f"e{i}", r) for i, r in enumerate([*a, single, *b, *static])]
    groups = ranks.group_ranks(entries)
    assert [[lab for lab, _ in g] for g in groups] == [["e0", "e1"], ["e3", "e4"], ["e5", "e6"], ["e7", "e8"]]
    assert ranks.single_for(groups[0], entries) == ("e2", single)
    assert ranks.single_for(groups[0], entries + [("e9", rank_run(0, world=1))]) is None  # two candidates: none
    plain = Run(command=["examples/train_ddp.py"], steps=5)  # no process group: not a baseline by itself
    assert ranks.single_for(groups[0], [("p", plain)]) is None


def test_pandas_views():
    runs = [rank_run(1, comm=1.0), rank_run(0, comm=3.0)]
    df = ranks.ranks_frame(runs)
    assert list(df.index) == [0, 1]
    assert df.loc[1, "busy_ms"] == 9.0 and df.loc[0, "comm_source"] == "host"
    seg = ranks.rank_segments_frame(runs)
    assert list(seg.columns) == [0, 1] and seg.loc["comm", 1] == 1.5 and seg.index.name == "segment"


def test_report_section_in_markdown_with_baseline_found_among_inputs():
    runs = [rank_run(0, 3, comm=6.0), rank_run(1, 3, comm=6.0), rank_run(2, 3, comm=1.0), rank_run(0, world=1, step=8.0)]
    rep = build_report(runs)
    assert len(rep.ranks) == 1
    job = rep.ranks[0]
    assert job["summary"]["straggler"] == 2 and job["summary"]["scaling_efficiency"] == pytest.approx(
        sum(r.sps for r in runs[:3]) / (3 * 12_500))
    assert [row[0] for row in job["rows"]] == ["0", "1", "2"] and "straggler" in job["rows"][2][-1]
    text = markdown.MarkdownRenderer().render(rep)
    assert "## Data-parallel job: train\\_ddp.py, 3 of 3 ranks (gloo)" in text
    assert "straggler: rank 2" in text and "Scaling efficiency" in text
    assert "| **comm** | 6.5 | 6.5 | 1.5 |" in text
    assert "train\\_ddp.py rank 2" in text  # the runs table names the ranks


def test_rank_line_and_headline():
    r = rank_run(1, comm=2.0)
    line = ranks.rank_line(r, "run.rank1.json")
    assert line.startswith("perfkit rank 1/2 [gloo, cpu]: 10,000 env-steps/s") and "comm 2 ms/step (20%)" in line
    assert line.endswith("record run.rank1.json")
    s = ranks.merge_ranks([rank_run(0, comm=1.0), r])
    assert ranks.headline(s, fmt_num)[0] == "2 ranks of a world of 2 (gloo): total 20,000 env steps/s, per rank 10,000, 10,000."


def test_the_dist_block_round_trips_and_is_type_checked(tmp_path):
    r = rank_run(1)
    back = Run.load(r.save(tmp_path / "r.json"))
    assert back.dist == r.dist
    d = json.loads(r.to_json())
    d["dist"] = [1]
    with pytest.raises(RecordError, match="'dist'"):
        Run.from_dict(d)
    del d["dist"]  # a record from before the block: rank 0 of 1
    old = Run.from_dict(d)
    assert old.dist == {} and ranks.world_of(old) == 1 and ranks.rank_of(old) == 0


def test_rank_record_paths(tmp_path):
    assert rank_record_path("runs/run.json", 3).as_posix() == "runs/run.rank3.json"
    assert rank_record_path("runs/run", 0).as_posix() == "runs/run.rank0"
    assert rank_record_path("runs/ddp/", 1).as_posix() == "runs/ddp/run.rank1.json"
    assert rank_record_path(tmp_path, 2) == tmp_path / "run.rank2.json"
    assert rank_record_path("/dev/null", 1).as_posix() == "/dev/null"


def test_launch_info():
    assert launch_info({}) == {"rank": 0, "local_rank": 0, "world_size": 1, "local_world_size": 1, "node": 0,
                               "launcher": None, "run_id": None, "master": None, "visible_devices": None}
    info = launch_info({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
                        "TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "n0", "MASTER_PORT": "1234"})
    assert (info["rank"], info["world_size"], info["local_rank"], info["node"], info["launcher"], info["master"]) == \
        (5, 8, 1, 1, "torchrun", "n0:1234")
    assert launch_info({"RANK": "9", "WORLD_SIZE": "2"})["rank"] == 0  # out of range: not believed
    assert launch_info({"WORLD_SIZE": "x"})["world_size"] == 1
    assert launch_info({"WORLD_SIZE": "2", "RANK": "1"})["launcher"] == "env"
    assert physical_gpu("cuda:0", "1") == "1" and physical_gpu("cuda:1", "4,6") == "6"
    assert physical_gpu("cuda:1", None) == "1" and physical_gpu("cpu", "1") is None and physical_gpu("cuda:2", "1") is None


# ---- issue 21.5: what a failed job's report says; multi-node ---------------------------------------------

def _failed(run, code, error, at):
    run.status, run.exit_code = "partial", code
    if error:
        run.extra["error"] = error
    run.extra["ended_at"] = at
    return run


def test_a_failed_job_names_exit_codes_the_exception_the_first_failure_and_the_missing_rank():
    runs = [_failed(rank_run(0, 3), 143, None, 1000.9), _failed(rank_run(1, 3), 1, "RuntimeError: boom", 1000.2)]
    s = ranks.merge_ranks(runs)
    assert s.failed == [1, 0] and s.first_failure == 1 and s.missing == [2]
    assert any("missing: rank 2 (no record: killed before writing it" in n for n in s.notes)
    head = ranks.headline(s, fmt_num)[0]
    assert head == "The job failed: rank 1 failed first (exit 1, RuntimeError: boom); then rank 0 (exit 143); no record from rank 2."
    job = build_report(runs).ranks[0]
    assert job["summary"]["first_failure"] == 1 and job["summary"]["exit_codes"] == {0: 143, 1: 1}
    assert job["label"].endswith("failed (first: rank 1)")
    cols = job["columns"]
    rows = {row[0]: dict(zip(cols, row)) for row in job["rows"]}
    assert rows["1"]["exit"] == "1" and rows["1"]["error"] == "RuntimeError: boom" and "failed first" in rows["1"]["note"]
    assert rows["2"]["status"] == "no record" and rows["2"]["note"] == "missing"
    text = markdown.MarkdownRenderer().render(build_report(runs))
    assert "rank 1 failed first (exit 1, RuntimeError: boom)" in text and "| 2 | - | - | - | no record |" in text


def test_a_rank_not_given_of_a_complete_job_reads_as_not_given():
    s = ranks.merge_ranks([rank_run(0, 2)])
    assert s.failed == [] and any("missing: rank 1 (not given)" in n for n in s.notes)
    assert ranks.headline(s, fmt_num)[0] == "No record from rank 1."


def test_two_jobs_of_one_script_get_distinct_headings():
    runs = [rank_run(0, run_id="a"), rank_run(1, run_id="a"), rank_run(0, run_id="b"), rank_run(1, run_id="b")]
    labels = [job["label"] for job in build_report(runs).ranks]
    assert len(labels) == 2 and len(set(labels)) == 2 and labels[1].endswith("job b")


def test_lowest_sps_is_named_only_beyond_noise_and_never_against_the_straggler():
    # lock step: SPS 1,820 vs 1,823 is noise; rank 1 is the straggler (the other waits for it)
    runs = [rank_run(0, comm=6.0, sps=1_820.0), rank_run(1, comm=1.0, sps=1_823.0)]
    s = ranks.merge_ranks(runs)
    assert s.straggler == 1 and s.slowest_rank is None
    job = build_report(runs).ranks[0]
    assert [row[-1] for row in job["rows"]] == ["", "straggler"]
    assert "SPS alike across ranks (within 10%)" in ranks.headline(s, fmt_num)[1]
    s = ranks.merge_ranks([rank_run(0, sps=1_000.0), rank_run(1, sps=1_500.0)])
    assert s.slowest_rank == 0 and "lowest SPS: rank 0" in ranks.headline(s, fmt_num)[1]


def test_comm_source_names_only_what_ran_in_the_steady_steps():
    r = rank_run(0, comm=0.0, ddp_exposed=0.75)
    r.dist["comm"].update(calls_per_step=0.0, waits_per_step=0.0, host_ms_per_step=0.0)  # DDP's set-up broadcast only
    assert ranks.comm_ms(r) == (0.75, "ddp")


def test_a_multi_rank_record_is_no_one_gpu_baseline(tmp_path):
    s = ranks.merge_ranks([rank_run(0), rank_run(1)], rank_run(0))
    assert s.scaling_efficiency is None and any("not a 1-GPU run" in n for n in s.notes)
    from click.testing import CliRunner

    from perfkit.cli import main

    paths = [str(rank_run(k).save(tmp_path / f"run.rank{k}.json")) for k in (0, 1)]
    res = CliRunner().invoke(main, ["report", *paths, "--single", paths[0], "-o", str(tmp_path / "rep")])
    assert res.exit_code == 2 and "--single" in res.output and "world of 2" in res.output
    assert not (tmp_path / "rep" / "index.html").exists()


def _node_run(rank, busy_extra=0.0, **kw):
    return rank_run(rank, 4, comm=6.0 - busy_extra, node=rank // 2, local_world=2, **kw)


def test_nodes_are_grouped_and_the_slow_node_named():
    runs = [_node_run(0), _node_run(1), _node_run(2, 3.0), _node_run(3, 2.0)]
    s = ranks.merge_ranks(runs)
    assert {n: e["ranks"] for n, e in s.nodes.items()} == {0: [0, 1], 1: [2, 3]}
    assert s.slow_node == 1 and s.straggler == 2
    assert "slow node: 1" in " ".join(ranks.headline(s, fmt_num))


def test_a_nodes_missing_records_are_named_with_their_node():
    s = ranks.merge_ranks([_node_run(0), _node_run(1)])
    assert s.missing == [2, 3] and s.nodes[1]["missing"] == [2, 3] and s.nodes[1]["ranks"] == []
    text = " ".join(ranks.headline(s, fmt_num))
    assert "node 1: ranks - (no record from 2, 3)" in text
    job = build_report([_node_run(0), _node_run(1)]).ranks[0]
    assert [row[:2] for row in job["rows"]] == [["0", "0"], ["1", "0"], ["2", "1"], ["3", "1"]]
