"""`perfkit report`: files, the hardware/software block, runs side by side, sweeps with the knee,
escaping of every user-controlled string, and the page as a real browser renders it."""

import json
import re

import pytest
from click.testing import CliRunner
from report_helpers import load_in_chromium, make_run, screenshot

from perfkit.cli import main
from perfkit.record import Finding, Run
from perfkit.sweeps.runner import SweepConfig, write_outputs
from perfkit.sweeps.record import PointResult


def report(*args):
    return CliRunner().invoke(main, ["report", *map(str, args)])


def test_two_runs_side_by_side(train_runs, tmp_path):
    out = tmp_path / "rep"
    res = report(*train_runs, "-o", out)
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["findings.png", "index.html", "report.md", "segments.png", "step_times.png"]
    md = (out / "report.md").read_text()
    # hardware / software block, one column per run
    assert "|  | train.py | train\\_naive.py |" in md
    for row in ("| **GPU** | NVIDIA H200 | NVIDIA H200 |", "| **driver** | 580.65 | 580.65 |",
                "| **torch** | 2.11.0 | 2.11.0 |", "| **warp** | 1.19.0 |", "| **mujoco** | 4.0.0 |",
                "| **backend** | mjwarp |", "| **num\\_envs** | 4,096 |", "| **sim\\_dt** | 0.005 |",
                "| **decimation** | 4 |", "| **policy\\_dt** | 0.02 |", "| **obs dim** | 27 |", "| **act dim** | 8 |",
                "| **rendering** | off |"):
        assert row in md, row
    # the runs table, and the costliest finding first
    assert "| train.py | complete | 4,096 | 200 | 1,200,000 | 4,800,000 |" in md
    assert "| train\\_naive.py | complete | 4,096 | 200 | 450,000 |" in md
    rows = [line for line in md.splitlines() if line.startswith("| train\\_naive.py | loop") or
            line.startswith("| train\\_naive.py | sync") or line.startswith("| train\\_naive.py | alloc")]
    assert [r.split(" | ")[1] for r in rows] == ["loop", "sync", "alloc"]
    assert "examples/train\\_naive.py:42" in md and "`mean_r = reward.mean().item()`" in md


def test_html_renders_in_chromium_with_every_image_loaded(train_runs, tmp_path):
    out = tmp_path / "rep"
    assert report(*train_runs, "-o", out).exit_code == 0
    seen = load_in_chromium(out / "index.html", tmp_path)
    assert seen["errors"] == []
    assert len(seen["images"]) == 3
    assert all(img["loaded"] and img["width"] > 300 for img in seen["images"]), seen["images"]
    assert all(img["src"].startswith("data:image/png;base64,") for img in seen["images"])  # self-contained
    assert seen["scripts"] == 1  # only the probe: the report itself runs no script
    assert seen["h2"] == ["Hardware and software", "Runs", "Plots", "Findings"]
    shot = screenshot(out / "index.html", tmp_path / "report.png", tmp_path)
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 20_000


def test_every_user_string_is_escaped(tmp_path):
    evil_dir = tmp_path / "<script>alert('path')"
    evil_dir.mkdir()
    finding = Finding(kind="sync", op="<b>.item()</b>", path="src/<script>alert('finding path')</script>.py", line=3,
                      function="step", segment="logging", count=10, per_step=1.0, est_ms_per_step=0.1,
                      message="</td></tr></table><script>alert('message')</script>",
                      code="x = '<img src=x onerror=alert(1)>' | `y` $z$")
    run = make_run("<script>alert('command')</script>.py", findings=[finding])
    run.env["name"] = "<iframe src=javascript:alert(1)>"
    path = run.save(evil_dir / "run.json")
    out = tmp_path / "rep"
    res = report(path, "-o", out, "--title", "<script>alert('title')</script>")
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text()
    for raw in ("<script>alert", "<img src=x", "<iframe", "<b>.item"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(&#39;message&#39;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    md = (out / "report.md").read_text()
    # a fenced block shows its content as text (the command line at the top); everything else is escaped
    fenced = re.findall(r"^```\n(.*?)\n```$", md, re.S | re.M)
    assert len(fenced) == 1 and "<script>alert('path')" in fenced[0]
    # as a Markdown renderer that passes HTML through shows it: every user string is text, no tag is live
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").enable("table").render(md)
    for raw in ("<script", "<img src=x", "<iframe", "<b>"):  # (the plots are <img src="...png">)
        assert raw not in rendered, raw
    assert "&lt;script>alert('message')&lt;/script>" in md
    assert "<code>x = '&lt;img src=x onerror=alert(1)&gt;' | `y` $z$</code>" in rendered  # the code cell, whole
    seen = load_in_chromium(out / "index.html", tmp_path)
    assert seen["errors"] == [] and seen["scripts"] == 1
    assert len(seen["images"]) == 3 and all(i["loaded"] for i in seen["images"])
    assert seen["title"] == "<script>alert('title')</script>"  # shown as text, not run
    assert "alert('message')" in seen["dom"].replace("&#39;", "'")  # the text is on the page


def synthetic_sweep(tmp_path, label_kw=None):
    """A sweep directory written by the sweep's own writer, from records we control."""
    out = tmp_path / "sweep"
    ns = [256 * 2**i for i in range(8)]
    cfg = SweepConfig(target="perfkit.envs:make_env", num_envs=ns, out_dir=out,
                      env_kwargs=label_kw or {"name": "ant", "backend": "mjwarp"},
                      command=["perfkit", "sweep", "perfkit.envs:make_env", "--num-envs", "256..32768"])
    points, runs = [], {}
    for n in ns:
        rec = f"points/{n}.json"
        if n == 32768:
            run = Run(num_envs=n, status="oom", machine=make_run().machine)
            run.extra["error"] = "OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 GiB"
            points.append(PointResult(num_envs=n, status="oom", record=rec, rc=3,
                                      error=run.extra["error"]))
        else:
            sps = 4e6 * n / (n + 1024)
            run = make_run(sps=sps, step_ms=1e3 * n / sps)
            run.num_envs = n
            run.segments = {"env.step": run.segments["physics"]}
            run.memory = {"gpu_used_bytes": 200 * 2**20 + n * 90_000}
            points.append(PointResult(num_envs=n, status="complete", record=rec, rc=0))
        run.save(out / rec)
        runs[n] = run
    write_outputs(cfg, points, runs, "2026-01-01T00:00:00+00:00")
    return out


def test_sweep_report_marks_the_knee_and_oom(tmp_path, train_runs):
    sweep = synthetic_sweep(tmp_path)
    out = tmp_path / "rep"
    res = report(sweep, *train_runs, "-o", out)
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    # 4e6 n/(n+1024): doubling gains 1024/(2n+1024) < 10 % first at n = 8192
    assert "knee at 8192 envs" in md
    assert "| 8,192 | complete |" in md and "KNEE" in md
    assert "| 32,768 | oom |" in md and "CUDA out of memory" in md
    assert "| **num\\_envs** | 256..32,768 (8 points) | 4,096 | 4,096 |" in md
    assert (out / "sps_memory.png").exists()
    seen = load_in_chromium(out / "index.html", tmp_path)
    assert seen["errors"] == [] and len(seen["images"]) == 4 and all(i["loaded"] for i in seen["images"])
    assert seen["h2"][:3] == ["Hardware and software", "Runs", "Sweep: perfkit.envs:make_env(name=ant,backend=mjwarp)"]


@pytest.mark.parametrize("content, message", [
    (None, "no such run record"),
    ("{not json", "not JSON"),
    (json.dumps({"schema": "perfkit.run/99", "steps": 1}), "schema 'perfkit.run/99'"),
    (json.dumps([1, 2]), "not a perfkit run record"),
    # issue 18 item 9: a schema line alone is no run (it rendered as a complete one, all zeros)
    (json.dumps({"schema": "perfkit.run/2"}), "an incomplete perfkit.run/2 run record: missing command, steps, num_envs"),
    (json.dumps({"schema": "perfkit.run/2", "command": ["x.py"], "steps": 3, "num_envs": None, "wall_s": 1.0,
                 "warmup_s": 0.0, "sps": 3.0, "step_ms": {}, "segments": {}, "findings": []}), "missing machine"),
])
def test_bad_inputs_exit_2_naming_the_file(tmp_path, train_runs, content, message):
    bad = tmp_path / "bad<run>.json"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "rep"
    res = report(train_runs[0], bad, "-o", out)
    assert res.exit_code == 2, res.output
    assert str(bad) in res.output and message in res.output
    assert not out.exists()  # nothing half-written


def test_sweep_manifest_of_another_schema_is_named(tmp_path):
    d = tmp_path / "sw"
    d.mkdir()
    (d / "sweep.json").write_text(json.dumps({"schema": "perfkit.sweep/7"}))
    res = report(d, "-o", tmp_path / "rep")
    assert res.exit_code == 2 and "sweep.json" in res.output and "perfkit.sweep/7" in res.output
    res = report(tmp_path, "-o", tmp_path / "rep")  # a directory that is no sweep
    assert res.exit_code == 2 and "without a sweep.json" in res.output


def test_run_without_findings_or_segments_still_reports(tmp_path):
    run = Run(command=["bare.py"], steps=10, num_envs=8, wall_s=1.0, sps=80.0, step_times_ms=[100.0] * 10,
              step_ms={"p50": 100.0, "p99": 100.0})
    out = tmp_path / "rep"
    res = report(run.save(tmp_path / "bare.json"), "-o", out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.glob("*.png")) == ["step_times.png"]
    md = (out / "report.md").read_text()
    assert "No findings recorded." in md and "| **GPU** | - |" in md


def test_a_site_found_at_every_sweep_point_is_listed_once(tmp_path):
    sweep = synthetic_sweep(tmp_path)
    for i, rec in enumerate(sorted((sweep / "points").glob("*.json"))):
        run = Run.load(rec)
        if run.status == "complete":
            run.findings = [Finding(kind="alloc", op="torch.zeros", path="env.py", line=7, function="step",
                                    segment="reward", per_step=1.0, est_ms_per_step=0.01 * (i + 1))]
            run.save(rec)
    out = tmp_path / "rep"
    assert report(sweep, "-o", out).exit_code == 0
    md = (out / "report.md").read_text()
    rows = [line for line in md.splitlines() if "| torch.zeros |" in line]
    assert len(rows) == 1, rows
    assert "1 costliest of 1." in md


def test_markdown_reads_as_it_renders_and_says_what_a_cpu_run_ran_on(tmp_path):
    """issue 18 item 9: no `**GPU** | cpu`, no `-&gt;`, no backslash-escaped backticks in report.md."""
    from markdown_it import MarkdownIt

    finding = Finding(kind="sync", op=".nonzero()", path="env.py", line=7, function="<module>", segment="reward",
                      count=20, per_step=1.0, message="index with the boolean mask -> use `masked_fill_` instead")
    run = make_run("cpu_train.py", findings=[finding])
    run.machine = {"device": "cpu", "cpu": "x86_64", "torch": "2.13.0"}
    run.env = {"name": "ant", "device": "cpu"}
    out = tmp_path / "rep"
    res = report(run.save(tmp_path / "run.json"), "-o", out)
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    assert "| **GPU** | cpu |" not in md and "| **GPU** | none: a CPU run (x86\\_64) |" in md
    assert "| **env device** | cpu |" in md  # the env's own device row says where the env ran
    assert "&gt;" not in md and "\\`" not in md
    assert "index with the boolean mask -> use `masked_fill_` instead" in md
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    assert "use <code>masked_fill_</code> instead" in rendered and "&lt;module&gt;</td>" in rendered


def test_a_run_without_a_detected_step_shows_counts_not_zero_rates(tmp_path):
    finding = Finding(kind="sync", op=".item()", path="s.py", line=4, function="<module>", count=200, per_step=0.0,
                      est_ms_per_step=0.0)
    run = Run(command=["s.py"], steps=0, findings=[finding], machine={"device": "cpu"})
    out = tmp_path / "rep"
    res = report(run.save(tmp_path / "run.json"), "-o", out)
    assert res.exit_code == 0, res.output
    row = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| sync"))
    assert "200 in the run (no step detected)" in row and "| 0 |" not in row


def test_step_time_plot_names_its_unit(tmp_path, monkeypatch):
    from perfkit.renderers import plots

    figs = []
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: (figs.append(fig), real_save(fig, path))[1])
    for times in ([3.0, 3.5, 4.0] * 20, [0.5] * 50 + [300.0] * 5):  # a linear axis, then a log one
        plots.step_time_distribution([("train.py", times)], tmp_path / "st.png")
        ax = figs[-1].axes[0]
        assert ax.get_xlabel().startswith("step time (ms)")
        notes = [t.get_text() for t in ax.texts]
        assert notes and all(line.endswith(" ms") for t in notes for line in t.splitlines())


def test_a_sweep_whose_points_all_failed_renders_without_warnings(tmp_path):
    import warnings

    out = tmp_path / "sweep"
    (out / "points").mkdir(parents=True)
    cfg = SweepConfig(target="perfkit.envs:make_env", num_envs=[256, 512], out_dir=out)
    points, runs = [], {}
    for n, status in ((256, "error"), (512, "oom")):
        run = Run(command=["x"], num_envs=n, status=status)
        run.save(out / "points" / f"{n}.json")
        points.append(PointResult(num_envs=n, status=status, record=f"points/{n}.json", error="boom"))
        runs[n] = run
    write_outputs(cfg, points, runs, "2026-12-01T00:00:00+00:00")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = report(out, "-o", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    assert [str(w.message) for w in caught] == []
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "no knee: all 2 points failed (error 1, oom 1)" in md and (tmp_path / "rep" / "sps_memory.png").exists()


def test_help_names_the_schema_this_perfkit_writes():
    from perfkit.record import SCHEMA

    res = CliRunner().invoke(main, ["report", "--help"])
    assert res.exit_code == 0 and f"run records ({SCHEMA};" in " ".join(res.output.split()), res.output
