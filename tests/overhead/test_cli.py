"""``perfkit overhead``: bad input is one ``Error:`` line and exit 2 with nothing run; a measured run
prints its table, writes --json / --markdown, and exits 1 naming a failed run or a failed gate."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from click.testing import CliRunner
from _overhead_helpers import PY, ROOT

from perfkit.cli import main


def cli(*args):
    return CliRunner().invoke(main, ["overhead", *map(str, args)])


def one_error_line(res):
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


@pytest.fixture
def script(tmp_path):
    s = tmp_path / "train.py"
    s.write_text("print('SPS: 1.0')\n")
    return s


@pytest.mark.parametrize("args, says", [
    (["nope.py"], "no such script: nope.py"),
    (["--arms", "plain,nvprof", "{s}"], "unknown arm 'nvprof'"),
    (["--arms", "perfkit,torch-profiler", "{s}"], "must include plain"),
    (["--arms", "plain", "{s}"], "at least one other arm"),
    (["--metric-regex", "SPS (", "{s}"], "does not compile"),
    (["--metric-regex", "SPS: \\d+", "{s}"], "has no group"),
    (["--wall-only", "--metric-regex", "x(1)", "{s}"], "--wall-only and --metric-regex exclude each other"),
    (["--arms", "plain,torch-profiler", "--max-overhead", "3%", "{s}"], "gate the perfkit arm"),
    (["--profile-args", "'--warmup-steps", "{s}"], "--profile-args: No closing quotation"),
    (["--json", "{dir}", "{s}"], "cannot write {dir}: it is a directory (nothing was run)"),
    (["-m", "no_such_module_xyz"], "no module named 'no_such_module_xyz'"),
])
def test_bad_input_is_one_error_line_and_nothing_runs(script, tmp_path, args, says):
    marker = tmp_path / "ran"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\nprint('SPS: 1.0')\n")
    subst = {"{s}": str(script), "{dir}": str(tmp_path)}
    line = one_error_line(cli(*[subst.get(a, a) for a in args]))
    assert says.replace("{dir}", str(tmp_path)) in line
    assert not marker.exists()


def test_option_errors_exit_2(script):
    assert cli().exit_code == 2
    assert cli("--rounds", "0", script).exit_code == 2
    res = cli("--max-overhead", "150%", script)
    assert res.exit_code == 2 and "gates nothing" in res.output


def test_help_says_how_to_measure_your_own_script():
    res = cli("--help")
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "measure it on your script the same way" in text
    assert "perfkit overhead train.py --num-envs 4096" in text
    assert "SPS: <float>" in text


def _overhead(args, cwd, env):
    return subprocess.run([PY, "-m", "perfkit", "overhead", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_measurement_writes_its_outputs_and_a_failed_gate_exits_1(fake, child_env, tmp_path):
    f = fake({"plain": [{"sps": 100.0}, {"sps": 200.0}], "perfkit": [{"sps": 98.0}, {"sps": 196.0}]})
    out = tmp_path / "out"
    p = _overhead(["--arms", "plain,perfkit", "--rounds", "2", "--warmup-runs", "0", "--max-overhead", "1%",
                   "--json", out / "o.json", "--markdown", out / "o.md", "--logs", out / "logs", f.script, *f.args],
                  tmp_path, child_env)
    assert p.returncode == 1, p.stderr
    assert "perfkit's median SPS ratio to plain is 0.9800, below 0.9900 (--max-overhead 1%)" in p.stderr
    assert "[round 2/2] plain" in p.stderr  # progress, one line a run
    assert f.order() == ["plain", "perfkit", "perfkit", "plain"]
    res = json.loads((out / "o.json").read_text())
    assert res["schema"] == "perfkit.overhead/1"
    assert [x["ratio"] for x in res["summary"]["arms"]["perfkit"]["ratios"]] == pytest.approx([0.98, 0.98])
    assert "| perfkit | 2/2 |" in (out / "o.md").read_text()
    table = p.stdout
    assert table.startswith(f"perfkit overhead: {f.script} ") and "0.9800" in table
    assert sorted(os.listdir(out / "logs")) == ["r1-perfkit.err", "r1-perfkit.json", "r1-perfkit.out", "r1-plain.err",
                                                "r1-plain.out", "r2-perfkit.err", "r2-perfkit.json", "r2-perfkit.out",
                                                "r2-plain.err", "r2-plain.out"]
    # the same runs pass a looser gate (and the module exit status is 0)
    f.log_path.unlink()
    p = _overhead(["--arms", "plain,perfkit", "--rounds", "1", "--warmup-runs", "0", "--max-overhead", "3%", "-q",
                   "--line-times", "--json", out / "lines.json", f.script, *f.args], tmp_path, child_env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # -q: no progress, and nothing failed
    # --line-times: each arm's wall split at its first and last line of stdout
    parts = json.loads((out / "lines.json").read_text())["summary"]["arms"]["perfkit"]["added_wall_parts_s"]
    assert set(parts) == {"start", "run", "end"}
    assert "perfkit wall (median): start " in p.stdout


def test_a_failed_run_exits_1_naming_it(fake, child_env, tmp_path):
    f = fake({"plain": [{"exit": 7, "stderr": "CUDA error: out of memory"}]})
    p = _overhead(["--arms", "plain,perfkit", "--rounds", "3", f.script, *f.args], tmp_path, child_env)
    assert p.returncode == 1
    assert "perfkit overhead: 1 run(s) failed: warm-up plain (exit 7)" in p.stderr
    assert "CUDA error: out of memory" in p.stdout  # the failed run's stderr, in the table's failure list
    assert f.order() == ["plain"]  # the warm-up failed: no round ran


def test_overhead_needs_torch_for_its_arms(script):
    code = ("import sys\nsys.modules['torch'] = None\nfrom perfkit.cli import main\n"
            "main(sys.argv[1:], prog_name='perfkit')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([PY, "-c", code, "overhead", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and p.stderr.strip() == "Error: perfkit overhead needs torch (pip install torch)"


def test_a_misspelled_option_is_no_such_option(script):
    res = cli("--round", "2", script)
    assert res.exit_code == 2 and "No such option" in res.output and "--rounds" in res.output, res.output
    assert "no such script" not in res.output
