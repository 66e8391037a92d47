"""`perfkit profile` never loses a record, never writes one where it was not asked, and refuses what
it cannot do before the script runs (issue 13, items 2-5 and 9)."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run

from _helpers import SCRIPTS, script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def perfkit(*args, cwd=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, SCRIPTS])}
    return subprocess.run([sys.executable, "-m", "perfkit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def test_an_unwritable_output_is_refused_before_the_script_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    res = CliRunner().invoke(main, ["profile", "-o", str(blocker / "run.json"), script("exits.py"), "ok"])
    assert res.exit_code == 2
    assert res.output.startswith("Error: cannot write ") and "not a directory" in res.output.lower()
    assert "the script was not run" in res.output and "argv" not in res.output  # exits.py prints its argv first
    res = CliRunner().invoke(main, ["profile", "-o", str(tmp_path), script("exits.py"), "ok"])  # a directory
    assert res.exit_code == 2 and "Error:" in res.output and "argv" not in res.output


@pytest.mark.parametrize("how, code, status", [("osexit", 5, "partial"), ("osexit_thread", 0, "complete")])
def test_os_exit_writes_the_record_first(tmp_path, how, code, status):
    out = tmp_path / "r.json"
    p = perfkit("profile", "--warmup-steps", "1", "-o", out, script("ends_how.py"), how, code)
    assert p.returncode == code, p.stderr
    assert p.stdout == "stepped\n"
    run = Run.load(out)
    assert run.status == status and run.exit_code == code and run.steps == 5 and run.num_envs == 4
    assert "run record:" in p.stderr  # the summary was printed too


def test_a_forked_child_ending_with_os_exit_does_not_write_the_record(tmp_path):
    out = tmp_path / "r.json"
    p = perfkit("profile", "-q", "--warmup-steps", "1", "-o", out, script("ends_how.py"), "fork")
    assert p.returncode == 0, p.stderr
    run = Run.load(out)
    assert run.status == "complete" and run.steps == 5 and run.exit_code == 0


def test_os_exit_is_restored_after_the_run(tmp_path):
    before = os._exit
    res = CliRunner().invoke(main, ["profile", "-q", "-o", str(tmp_path / "r.json"), script("exits.py"), "ok"])
    assert res.exit_code == 0 and os._exit is before


@pytest.fixture
def in_dir(tmp_path):
    """Run in-process from ``tmp_path``; the working directory and sys.path are restored after."""
    old, path = os.getcwd(), list(sys.path)
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(old)
    sys.path[:] = path


def profile_here(*args):
    return CliRunner().invoke(main, ["profile", *map(str, args)])


def test_a_relative_output_stays_where_perfkit_was_started(in_dir):
    tmp_path = in_dir
    p = profile_here("-q", "-o", "out/run.json", script("ends_how.py"), "chdir", "elsewhere")
    assert p.exit_code == 0, p.output
    assert (tmp_path / "out" / "run.json").is_file()
    assert not (tmp_path / "elsewhere" / "out").exists()
    assert Run.load(tmp_path / "out" / "run.json").steps > 0


def test_module_from_the_working_directory_like_python_m(in_dir):
    tmp_path = in_dir
    pkg = tmp_path / "mypkg_pk13"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys\nprint('ran', __name__, sys.argv[1:])\n")
    ref = subprocess.run([sys.executable, "-m", "mypkg_pk13.train", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert ref.returncode == 0 and ref.stdout == "ran __main__ ['x']\n"  # what python -m does
    p = profile_here("-q", "-o", "r.json", "-m", "mypkg_pk13.train", "x")
    assert p.exit_code == 0, p.output
    assert p.stdout == ref.stdout
    assert Run.load(tmp_path / "r.json").command == ["-m", "mypkg_pk13.train", "x"]


def test_a_syntax_error_reads_like_pythons_and_runs_nothing(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("print('started')\ndef f(:\n    pass\n")
    ref = subprocess.run([sys.executable, "bad.py"], capture_output=True, text=True, cwd=tmp_path)
    p = perfkit("profile", "-o", "r.json", "bad.py", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith("Error: cannot run bad.py: it does not compile; nothing was run\n")
    assert ref.stderr.strip() in p.stderr  # Python's own report, verbatim
    assert "Traceback" not in p.stderr and "runpy" not in p.stderr and "perfkit/" not in p.stderr
    assert "started" not in p.stdout and not (tmp_path / "r.json").exists()


def test_without_num_envs_throughput_is_steps_per_second(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(SCRIPTS)
    out = tmp_path / "r.json"
    p = profile_here("--warmup-steps", "1", "--step-fn", "no_num_envs:Sim.step", "-o", out, script("no_num_envs.py"))
    assert p.exit_code == 0, p.output
    run = Run.load(out)
    assert run.num_envs is None and run.steps == 11 and run.throughput_unit == "steps/s"
    assert " steps/s" in p.stderr and "env-steps/s" not in p.stderr.split("calls/step")[0]
    assert "--num-envs N" in p.stderr  # says how to give it
    assert "calls/step: times per steady-state step the loop entered the segment" in p.stderr


def test_num_envs_option_gives_the_env_count(tmp_path, monkeypatch):
    from perfkit.profile.session import Session

    if "num_envs" not in inspect.signature(Session).parameters:
        pytest.skip("Session(num_envs=...) is the lead's half of item 9 (perfkit/profile/session.py)")
    monkeypatch.syspath_prepend(SCRIPTS)
    out = tmp_path / "r.json"
    p = profile_here("--warmup-steps", "1", "--num-envs", "32", "--step-fn", "no_num_envs:Sim.step", "-o", out,
                     script("no_num_envs.py"))
    assert p.exit_code == 0, p.output
    run = Run.load(out)
    assert run.num_envs == 32 and run.throughput_unit == "env-steps/s" and "env-steps/s" in p.stderr
    assert run.findings_of("loop"), "per-env loop detection uses the given env count"


def test_num_envs_option_is_checked():
    res = CliRunner().invoke(main, ["profile", "--num-envs", "0", script("exits.py"), "ok"])
    assert res.exit_code == 2 and "--num-envs" in res.output
    res = CliRunner().invoke(main, ["profile", "--help"])
    assert "--num-envs" in res.output
