"""Issue 21.1 and 21.6: a job in which one rank fails. Every rank leaves its record (``partial``, its
own exit status, its exception), SIGTERM after the program ended does not cost a record, and the
failing rank's stderr is plain torchrun's (torch's ``[rankN]:`` prefixes, no perfkit frame) apart
from perfkit's one summary line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from _dist_helpers import SCRIPTS, env, torchrun

from perfkit.record import Run

FAIL = str(SCRIPTS / "dp_fail.py")


@pytest.mark.parametrize("term_after", [0.01, 0.05, 0.2])
def test_a_script_that_raises_then_gets_sigterm_leaves_its_record(tmp_path, term_after):
    p = subprocess.run([sys.executable, "-m", "perfkit", "profile", "-q", "-o", "r.json", FAIL, "--alone",
                        "--fail-rank", "0", "--term-after", str(term_after)], cwd=tmp_path, env=env(),
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "RuntimeError: planted failure on rank 0 at step 10" in p.stderr
    run = Run.load(tmp_path / "r.json")
    assert (run.status, run.exit_code) == ("partial", 1)
    assert run.extra["error"] == "RuntimeError: planted failure on rank 0 at step 10"
    assert p.returncode in (1, -signal.SIGTERM)  # 1 unless SIGTERM came after the record was written


def test_sigterm_during_the_record_build_is_held_off(monkeypatch):
    """Deterministic: SIGTERM lands inside the record build (in-process)."""
    from perfkit.profile import runner
    from perfkit.profile.session import Session

    build = Session._record

    def terminated_while_building(self, status, t_end):
        os.kill(os.getpid(), signal.SIGTERM)
        return build(self, status, t_end)

    monkeypatch.setattr(Session, "_record", terminated_while_building)
    written = []
    try:
        out = runner.run(FAIL, ["--alone", "--fail-rank", "0", "--steps", "12"],
                         on_exit=lambda o: written.append(o.run.status) or 7)
    finally:
        import torch.distributed as dist

        if dist.is_initialized():  # the script raised before destroying its group
            dist.destroy_process_group()
    assert written == ["partial"] and out.exit_code == 7 and out.run.exit_code == 1
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back afterwards


def _rank_stderr(logs, rank: int) -> str:
    found = [os.path.join(d, "stderr.log") for d, _, files in os.walk(logs) if "stderr.log" in files
             and os.path.basename(d) == str(rank)]
    assert len(found) == 1, found
    with open(found[0]) as f:
        return f.read()


@pytest.fixture(scope="module")
def failed_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("failed")
    args = ["--log-dir", "logs-plain", "--redirects", "2", FAIL]
    plain = torchrun(2, args, cwd=out)
    prof = torchrun(2, ["--log-dir", "logs-perfkit", "--redirects", "2", "-m", "perfkit", "profile", "-o", "rec/", FAIL],
                    cwd=out)
    return out, plain, prof


def test_every_rank_of_a_failed_job_leaves_its_record(failed_job):
    out, plain, prof = failed_job
    assert plain.returncode != 0 and prof.returncode != 0
    assert sorted(p.name for p in (out / "rec").glob("*.json")) == ["run.rank0.json", "run.rank1.json"], (
        prof.stderr + "".join(_rank_stderr(out / "logs-perfkit", r) for r in (0, 1)))
    runs = {r: Run.load(out / "rec" / f"run.rank{r}.json") for r in (0, 1)}
    assert runs[1].status == "partial" and runs[1].exit_code == 1
    assert runs[1].extra["error"] == "RuntimeError: planted failure on rank 1 at step 10"
    assert runs[0].status == "partial" and runs[0].exit_code in (1, 143)  # gloo's error, or torchrun's SIGTERM
    assert runs[1].extra["ended_at"] < runs[0].extra["ended_at"]


def test_the_failing_ranks_stderr_is_plain_torchruns(failed_job):
    out, _, _ = failed_job
    plain = _rank_stderr(out / "logs-plain", 1)
    prof = _rank_stderr(out / "logs-perfkit", 1)
    assert "[rank1]: RuntimeError: planted failure on rank 1 at step 10" in plain  # torch's excepthook
    assert "in step" in plain  # raised inside the env step perfkit wraps: its wrapper's frame is taken out
    summary = [ln for ln in prof.splitlines() if ln.startswith("perfkit rank 1/2")]
    assert len(summary) == 1 and summary[0].startswith("perfkit rank 1/2 [gloo, cpu]: partial (exit 1), ")

    def lines(text):  # a gloo group left to interpreter exit aborts the process, or not: either way, plain too
        return [ln for ln in text.splitlines() if ln != "terminate called without an active exception"]

    assert [ln for ln in lines(prof) if not ln.startswith("perfkit rank 1/2")] == lines(plain)
    assert "perfkit" not in plain and "perfkit/" not in prof.replace(summary[0], "")


def test_rank_0_failing_prints_its_one_line_not_the_summary(tmp_path):
    """Rank 0 summarizes the job when it ends well; when it is the rank that failed, its stderr is
    plain torchrun's plus its one line, like any failing rank's."""
    prof = torchrun(2, ["--log-dir", "logs", "--redirects", "2", "-m", "perfkit", "profile", "-o", "rec/", FAIL,
                        "--fail-rank", "0"], cwd=tmp_path)
    assert prof.returncode != 0
    err = _rank_stderr(tmp_path / "logs", 0)
    assert "[rank0]: RuntimeError: planted failure on rank 0 at step 10" in err
    mine = [ln for ln in err.splitlines() if ln.startswith("perfkit")]
    assert len(mine) == 1 and mine[0].startswith("perfkit rank 0/2 [gloo, cpu]: partial (exit 1), "), mine
    assert "calls/step" not in err  # no console summary


def test_the_merged_report_says_what_happened(failed_job):
    out, _, _ = failed_job
    from _dist_helpers import perfkit

    proc = perfkit(["report", "rec/run.rank0.json", "rec/run.rank1.json", "-o", "rep"], cwd=out)
    assert proc.returncode == 0, proc.stderr
    md = (out / "rep" / "report.md").read_text()
    assert "The job failed: rank 1 failed first (exit 1, RuntimeError: planted failure on rank 1 at step 10); then rank 0" in md
    assert "failed (first: rank 1)" in md
