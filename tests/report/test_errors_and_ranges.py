"""One line and exit 2 for bad input to report / export-trace / compare (issue 13, item 5), and
export-trace over the whole timeline or a step range (item 9)."""

import json

import pytest
from click.testing import CliRunner
from report_helpers import make_run

from perfkit.cli import main
from perfkit.record import Run


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def one_error_line(res):
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


@pytest.fixture
def record(tmp_path):
    return make_run().save(tmp_path / "run.json")


def test_report_to_an_unwritable_place(record, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    msg = one_error_line(cli("report", record, "-o", blocker / "rep"))
    assert "cannot write" in msg and "not a directory" in msg.lower()
    msg = one_error_line(cli("report", record, "-o", blocker))
    assert "cannot write" in msg


def test_report_default_output_is_under_runs(record, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = cli("report", record)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "runs" / "report" / "index.html").is_file() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("field, value, says", [
    ("sps", "fast", "field 'sps' is \"fast\", not a number"),
    ("steps", 2.5, "field 'steps' is 2.5, not an integer"),
    ("segments", {"physics": {"cpu_ms_per_step": "1ms"}}, "field 'segments.physics.cpu_ms_per_step'"),
    ("findings", [{"kind": "sync", "op": ".item()", "path": "a.py", "line": "ten"}], "field 'findings[0].line'"),
    ("findings", [{"kind": "sync"}], "findings[0] lacks op, path, line"),
    ("step_times_ms", [1.0, None], "field 'step_times_ms'"),
    ("command", "train.py", "not a list of strings"),
])
def test_a_wrongly_typed_field_names_itself(tmp_path, field, value, says):
    d = make_run().to_dict()
    d[field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    for args in (("report", path, "-o", tmp_path / "rep"), ("export-trace", path, "-o", tmp_path / "t.json"),
                 ("compare", path, path)):
        msg = one_error_line(cli(*args))
        assert str(path) in msg and says in msg, msg


def test_null_sps_loads_as_not_measured(tmp_path):
    d = make_run().to_dict()
    d["sps"] = None
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    assert Run.load(path).sps is None
    res = cli("report", path, "-o", tmp_path / "rep")
    assert res.exit_code == 0, res.output


def test_export_trace_to_an_unwritable_place(record, tmp_path):
    msg = one_error_line(cli("export-trace", record, "-o", tmp_path))
    assert "cannot write" in msg and "directory" in msg
    (tmp_path / "f").write_text("")
    assert "cannot write" in one_error_line(cli("export-trace", record, "-o", tmp_path / "f" / "t.json"))


TIMELINE = [{"step": s, "segment": seg, "start_ms": 10.0 * s + i, "dur_ms": 1.0, "gpu": False}
            for s in range(5, 105) for i, seg in enumerate(("physics", "policy"))]


def steps_of(path):
    return sorted({e["args"]["step"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"})


def test_export_trace_covers_the_whole_timeline_or_a_range(tmp_path):
    run = Run(command=["train.py"], num_envs=8, steps=100, sps=1.0)
    run.timeline.spans = TIMELINE
    src = run.save(tmp_path / "run.json")
    out = tmp_path / "t.json"
    res = cli("export-trace", src, "-o", out)
    assert res.exit_code == 0 and "steps 5..104" in res.output
    assert steps_of(out) == list(range(5, 105))  # every step, not 8
    assert cli("export-trace", src, "-o", out, "--steps", "20:23").exit_code == 0
    assert steps_of(out) == [20, 21, 22]
    assert cli("export-trace", src, "-o", out, "--steps", "100:").exit_code == 0
    assert steps_of(out) == [100, 101, 102, 103, 104]
    assert cli("export-trace", src, "-o", out, "--steps", "7").exit_code == 0
    assert steps_of(out) == [7]
    msg = one_error_line(cli("export-trace", src, "-o", out, "--steps", "200:300"))
    assert "no step in 200:300" in msg and "steps 5..104" in msg


def test_export_trace_range_over_step_times(tmp_path):
    run = Run(command=["sweep-point"], num_envs=256, steps=4, step_times_ms=[2.0, 3.0, 1.5, 1.0])
    src = run.save(tmp_path / "run.json")
    out = tmp_path / "t.json"
    assert cli("export-trace", src, "-o", out, "--steps", ":2").exit_code == 0
    assert steps_of(out) == [0, 1]


@pytest.mark.parametrize("bad", ["a:b", "5:5", "9:3", "-1:4", "", "1:2:3"])
def test_export_trace_bad_step_ranges(record, tmp_path, bad):
    res = cli("export-trace", record, "-o", tmp_path / "t.json", "--steps", bad)
    assert res.exit_code == 2 and "--steps" in res.output


def test_a_run_without_num_envs_reports_steps_per_second(tmp_path):
    run = make_run()
    run.num_envs = None
    run.sps = 350.0
    out = tmp_path / "rep"
    assert cli("report", run.save(tmp_path / "r.json"), "-o", out).exit_code == 0
    md = (out / "report.md").read_text()
    assert "| 350 steps/s |" in md
    assert "num\\_envs unknown, so its throughput counts loop steps (steps/s), not env steps" in md
    assert "steps/s" in (out / "index.html").read_text()
