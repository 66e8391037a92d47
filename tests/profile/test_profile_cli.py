"""`perfkit profile`: exit statuses, pass-through, partial records, script args, -m, budgets."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run

from _helpers import SCRIPTS, line_of, script


def invoke(args, cwd=None, env_path=None):
    runner = CliRunner()
    old = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        return runner.invoke(main, ["profile", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


def test_script_args_and_complete_record(tmp_path):
    out = tmp_path / "run.json"
    r = invoke(["-o", str(out), "--warmup-steps", "1", script("exits.py"), "ok", "--flag", "-x"])
    assert r.exit_code == 0, r.output
    assert "argv ['ok', '--flag', '-x']" in r.output  # options after the script belong to the script
    assert "done __main__" in r.output
    run = Run.load(out)
    assert run.status == "complete" and run.exit_code == 0
    assert run.command == [script("exits.py"), "ok", "--flag", "-x"]
    assert run.total_steps == 4 and run.num_envs == 8
    f = run.findings_of("sync")[0]
    # perfkit.run/2: a finding's count is over the steady-state steps (4 steps, 1 of warm-up)
    assert (f.op, f.line, f.count, f.per_step) == (".item()", line_of(script("exits.py"), "return self.x.sum().item()"), 3, 1.0)
    assert (run.steps, run.total_steps, run.warmup_steps) == (3, 4, 1)


def test_a_real_process_keeps_stdout_the_scripts_and_exits_like_python(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "perfkit", "profile", "--warmup-steps", "1", "-o", str(out),
                        script("exits.py"), "raise"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert p.stdout == "argv ['raise']\n"  # the summary goes to stderr
    assert "to-stderr" in p.stderr and "env-steps/s" in p.stderr and ".item()" in p.stderr
    assert "Traceback (most recent call last)" in p.stderr and "ValueError: planted failure" in p.stderr
    assert "perfkit/profile/runner.py" not in p.stderr and 'exits.py", line' in p.stderr  # perfkit's frames trimmed
    run = Run.load(out)
    assert run.status == "partial" and run.exit_code == 1 and run.steps == 3


@pytest.mark.parametrize("mode,code", [("exit3", 3), ("raise", 1), ("interrupt", 130)])
def test_exit_status_passes_through_and_partial_record_is_written(tmp_path, mode, code):
    out = tmp_path / "r.json"
    r = invoke(["-o", str(out), script("exits.py"), mode])
    assert r.exit_code == code, r.output
    run = Run.load(out)
    assert run.status == "partial" and run.exit_code == code
    assert run.total_steps == 4
    if mode == "raise":
        assert "ValueError: planted failure" in r.output
    if mode == "interrupt":
        assert "KeyboardInterrupt" in r.output


def test_missing_script_is_a_clear_error_with_status_2(tmp_path):
    r = invoke(["-o", str(tmp_path / "r.json"), str(tmp_path / "nope.py")])
    assert r.exit_code == 2
    assert "no such script" in r.output and "nope.py" in r.output
    assert not (tmp_path / "r.json").exists()
    r = invoke([])
    assert r.exit_code == 2 and "give a script" in r.output
    r = invoke(["-m", "no_such_module_pk"])
    assert r.exit_code == 2 and "no module named" in r.output


def test_module_mode_with_args(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(SCRIPTS)
    out = tmp_path / "m.json"
    r = invoke(["-o", str(out), "-m", "pkmod_demo.run", "--steps", "6"])
    assert r.exit_code == 0, r.output
    assert "module ran 6 __main__" in r.output
    run = Run.load(out)
    assert run.command == ["-m", "pkmod_demo.run", "--steps", "6"]
    f = run.findings_of("sync")[0]
    # perfkit.run/2: count over the steady steps (6 steps, the default 5 of warm-up)
    assert f.op == "t[bool_mask]" and (f.count, f.per_step, run.steps) == (1, 1.0, 1) and f.path.endswith("run.py")


def test_budgets_exit_2_listing_sites(tmp_path):
    out = tmp_path / "b.json"
    r = invoke(["-o", str(out), "--max-syncs-per-step", "0", "--warmup-steps", "1", script("exits.py"), "ok"])
    assert r.exit_code == 2
    assert "budget exceeded" in r.output and "exits.py:" in r.output and ".item()" in r.output
    run = Run.load(out)
    assert run.extra["budget"]["exceeded"]
    r = invoke(["-o", str(out), "--max-syncs-per-step", "1", "--max-allocs-per-step", "5", "--warmup-steps", "1",
                script("exits.py"), "ok"])
    assert r.exit_code == 0, r.output
    # the script's own failure status wins over a budget overrun
    r = invoke(["-o", str(out), "--max-syncs-per-step", "0", script("exits.py"), "exit3"])
    assert r.exit_code == 3


def test_bad_options_are_usage_errors(tmp_path):
    r = invoke(["--max-syncs-per-step", "-1", script("exits.py"), "ok"])
    assert r.exit_code == 2
    r = invoke(["--step-fn", "nocolon", script("exits.py"), "ok"])
    assert r.exit_code == 2 and "module:Class.method" in r.output
    r = invoke(["-o", str(tmp_path / "x.json"), "--step-fn", "no_such_mod_pk:Env.step", script("exits.py"), "ok"])
    assert r.exit_code == 2 and "no_such_mod_pk" in r.output


def test_help_lists_the_options():
    r = CliRunner().invoke(main, ["profile", "--help"])
    assert r.exit_code == 0
    for opt in ("--max-syncs-per-step", "--max-allocs-per-step", "--verify", "--step-fn", "-m", "-o"):
        assert opt in r.output


def test_a_misspelled_option_is_no_such_option_and_the_scripts_options_pass_unchanged(tmp_path):
    """issue 18 item 7: before the script, every option is perfkit's (a typo is click's 'No such option
    ... Did you mean'); from the script on, every argument is the script's, options included."""
    out = tmp_path / "r.json"
    r = invoke(["--max-sync-per-step", "0", "-o", str(out), script("exits.py"), "ok"])
    assert r.exit_code == 2, r.output
    assert "No such option" in r.output and "--max-syncs-per-step" in r.output and "no such script" not in r.output
    assert not out.exists()
    r = invoke(["-q", "-o", str(out), "--warmup-steps", "1", script("exits.py"), "ok", "--num-envs", "4",
                "--max-sync-per-step", "-o", "x", "--", "-q"])
    assert r.exit_code == 0, r.output
    assert "argv ['ok', '--num-envs', '4', '--max-sync-per-step', '-o', 'x', '--', '-q']" in r.output
    r = invoke(["-qo", str(out), "--", script("exits.py"), "ok", "--help"])  # a short cluster, and `--`
    assert r.exit_code == 0 and "argv ['ok', '--help']" in r.output, r.output


def test_a_step_fn_whose_class_is_missing_says_so(tmp_path):
    """issue 18 item 9: the module is there, the class is not: not "module 'Nope' not found"."""
    out = tmp_path / "r.json"
    r = invoke(["-q", "-o", str(out), "--step-fn", "no_num_envs:Nope.step", script("no_num_envs.py")], cwd=SCRIPTS)
    assert r.exit_code == 2, r.output
    assert "module 'no_num_envs' has no 'Nope'" in r.output and "not found" not in r.output
    r = invoke(["-q", "-o", str(out), "--step-fn", "no_num_envs:Sim.advance", script("no_num_envs.py")], cwd=SCRIPTS)
    assert r.exit_code == 2 and "class 'Sim' has no attribute 'advance'" in r.output, r.output


def test_findings_of_a_run_without_a_step_show_their_count_not_zero_per_step(tmp_path):
    """issue 18 item 9: a sync that ran 200 times in a run with no detected step is not `0/step ~0 ms/step`."""
    s = tmp_path / "nostep.py"
    s.write_text("import torch\nx = torch.zeros(4)\nfor _ in range(200):\n    x.sum().item()\n")
    r = invoke(["-o", str(tmp_path / "r.json"), str(s)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # the console folds long lines
    assert "nostep.py:4 .item() in <module>() [other] 200x in the run (no step detected" in text
    assert "0/step" not in text and "~0 ms/step" not in text
