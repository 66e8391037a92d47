"""Outputs are written *to* a path, never *over* it: a symlink stays a link (its target is written), a
device or a FIFO is written into and survives, a regular file is replaced atomically (issue 13, item 1)."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.outputs import OutputError, check_writable, write_text
from perfkit.record import Run

RUN = Run(command=["train.py"], steps=3, num_envs=4, sps=10.0, step_times_ms=[1.0, 2.0, 3.0])


class FifoReader:
    """Reads a FIFO to its end in a thread (a writer blocks until a reader opens it)."""

    def __init__(self, path):
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(path,), daemon=True)
        self.thread.start()

    def _read(self, path):
        with open(path, "rb") as f:
            self.data = f.read()

    def text(self) -> str:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "nothing was written to the FIFO"
        return self.data.decode()


@pytest.fixture
def devices_guarded():
    """A broken writer replaces /dev/null (as root, a regular file takes its place and every later
    subprocess writing to it misbehaves): put the devices back if that happened, and fail."""
    yield
    broken = []
    for path, minor in (("/dev/null", 3), ("/dev/full", 7)):
        if os.path.lexists(path) and not stat.S_ISCHR(os.lstat(path).st_mode):
            broken.append(path)
            os.unlink(path)
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            os.chmod(path, 0o666)
    assert not broken, f"{broken} were replaced by regular files (restored)"


def test_dev_null_stays_a_device(devices_guarded):
    write_text("/dev/null", "x" * 10_000)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    RUN.save("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_dev_full_is_an_error_and_stays_a_device(devices_guarded):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(OSError):
        RUN.save("/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_is_written_into_and_survives(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    RUN.save(fifo)
    assert Run.from_dict(json.loads(reader.text())).step_times_ms == [1.0, 2.0, 3.0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left beside it


def test_a_symlink_stays_a_link_and_its_target_is_written(tmp_path):
    target = tmp_path / "real" / "run.json"
    target.parent.mkdir()
    target.write_text("stale")
    os.chmod(target, 0o640)
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    RUN.save(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert Run.load(target).sps == 10.0  # the target is fresh, not stale
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # and keeps its mode
    assert sorted(p.name for p in target.parent.iterdir()) == ["run.json"]


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "runs" / "new.json")
    RUN.save(link)
    assert link.is_symlink() and Run.load(tmp_path / "runs" / "new.json").steps == 3


def test_a_regular_file_is_replaced_whole(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("x" * 100_000)
    RUN.save(path)
    assert Run.load(path).steps == 3 and sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_check_writable_says_why(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="(?i)not a directory"):
        check_writable(tmp_path / "file" / "run.json")
    with pytest.raises(OutputError, match="is a directory"):
        check_writable(tmp_path)
    assert check_writable(tmp_path / "new" / "deeper" / "run.json") == tmp_path / "new" / "deeper" / "run.json"
    assert check_writable("/dev/null") == __import__("pathlib").Path("/dev/null")
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        os.chmod(ro, 0o500)
        with pytest.raises(OutputError, match="not writable"):
            check_writable(ro / "run.json")


# ---- the commands ---------------------------------------------------------------------------------

@pytest.fixture
def exits_script():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "profile", "scripts", "exits.py")


def test_profile_output_to_dev_null_a_fifo_and_a_symlink(tmp_path, exits_script, devices_guarded):
    def profile(out):
        return CliRunner().invoke(main, ["profile", "-q", "-o", str(out), exits_script, "ok"])

    assert profile("/dev/null").exit_code == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    assert profile(fifo).exit_code == 0
    assert json.loads(reader.text())["schema"] == "perfkit.run/3" and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    target = tmp_path / "run-1.json"
    target.write_text("stale")
    link = tmp_path / "latest.json"
    link.symlink_to(target.name)
    assert profile(link).exit_code == 0
    assert link.is_symlink() and Run.load(target).status == "complete"


def test_export_trace_output_to_a_fifo_and_a_symlink(tmp_path):
    src = RUN.save(tmp_path / "run.json")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    res = CliRunner().invoke(main, ["export-trace", str(src), "-o", str(fifo)])
    assert res.exit_code == 0, res.output
    assert "traceEvents" in json.loads(reader.text()) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    link = tmp_path / "trace.json"
    link.symlink_to(tmp_path / "t-real.json")
    assert CliRunner().invoke(main, ["export-trace", str(src), "-o", str(link)]).exit_code == 0
    assert link.is_symlink() and "traceEvents" in json.loads((tmp_path / "t-real.json").read_text())


# ---- an output never replaces an input; it is proven writable before anything runs (issue 18, items 3-4)

MARKER_SCRIPT = "import pathlib, sys\npathlib.Path(sys.argv[0]).with_suffix('.ran').write_text('ran')\n"


@pytest.fixture
def marker_script(tmp_path):
    """A script that leaves ``s.ran`` beside itself when it runs."""
    script = tmp_path / "s.py"
    script.write_text(MARKER_SCRIPT)
    return script


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_profile_refuses_an_output_that_is_its_script_before_running_it(tmp_path, marker_script):
    link = tmp_path / "link.py"
    link.symlink_to(marker_script.name)
    data = tmp_path / "data.txt"
    data.write_text("the script's input")
    for out, extra in ((marker_script, ()), (link, ()), (data, (data,))):
        res = _cli("profile", "-q", "-o", out, marker_script, *extra)
        assert res.exit_code == 2, res.output
        assert "would replace it" in res.output and "the script was not run" in res.output
    assert marker_script.read_text() == MARKER_SCRIPT and data.read_text() == "the script's input"
    assert not (tmp_path / "s.ran").exists()


def test_profile_refuses_an_output_that_is_its_module(tmp_path, monkeypatch):
    pkg = tmp_path / "pk_outmod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "run.py").write_text("print('ran')\n")
    monkeypatch.chdir(tmp_path)
    res = _cli("profile", "-q", "-o", pkg / "run.py", "-m", "pk_outmod.run")
    assert res.exit_code == 2 and "would replace it" in res.output, res.output
    assert (pkg / "run.py").read_text() == "print('ran')\n" and "ran" not in res.output


def test_export_trace_refuses_to_write_over_its_record(tmp_path):
    src = RUN.save(tmp_path / "r.json")
    before = src.read_text()
    res = _cli("export-trace", src, "-o", src)
    assert res.exit_code == 2 and "would replace it" in res.output, res.output
    assert src.read_text() == before


def test_report_refuses_to_write_over_a_record_it_reads(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    src = RUN.save(out / "report.md")  # a record that happens to sit where the report's Markdown goes
    before = src.read_text()
    res = _cli("report", src, "-o", out)
    assert res.exit_code == 2 and "would replace it" in res.output, res.output
    assert src.read_text() == before and sorted(p.name for p in out.iterdir()) == ["report.md"]


def test_overhead_refuses_outputs_over_its_script_or_each_other(tmp_path, marker_script):
    res = _cli("overhead", "--json", marker_script, marker_script)
    assert res.exit_code == 2 and "would replace it" in res.output, res.output
    same = tmp_path / "o.txt"
    res = _cli("overhead", "--json", same, "--markdown", same, marker_script)
    assert res.exit_code == 2 and "name the same file" in res.output, res.output
    assert marker_script.read_text() == MARKER_SCRIPT and not (tmp_path / "s.ran").exists()


def test_an_output_under_proc_is_refused_before_the_script_runs(tmp_path, marker_script):
    with pytest.raises(OutputError):
        check_writable("/proc/perfkit-test/run.json")
    with pytest.raises(OutputError):
        check_writable("/proc/perfkit-test.json")
    res = _cli("profile", "-q", "-o", "/proc/perfkit-test/run.json", marker_script)
    assert res.exit_code == 2 and "cannot write /proc/perfkit-test/run.json" in res.output, res.output
    assert not (tmp_path / "s.ran").exists()


def test_check_writable_probes_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import perfkit.outputs as outputs

    made = []
    real_probe = outputs._probe
    monkeypatch.setattr(outputs, "_probe", lambda folder: (made.append(folder.is_dir()), real_probe(folder)))
    target = tmp_path / "new" / "deeper" / "run.json"
    check_writable(target)
    assert made == [True]  # the folder was created and a file written in it ...
    assert list(tmp_path.iterdir()) == []  # ... and both removed: a refused command leaves nothing
    (tmp_path / "old.json").write_text("kept")
    check_writable(tmp_path / "old.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"] and (tmp_path / "old.json").read_text() == "kept"


def test_check_writable_shares_a_new_folder_with_a_process_checking_it_at_the_same_moment(tmp_path, monkeypatch):
    """Every rank of a torchrun job checks ``-o rec/`` at once: the folder another rank makes between
    this one's look and its mkdir is used (and left to its maker), not an error."""
    import pathlib

    real_mkdir = pathlib.Path.mkdir

    def other_rank_first(self, *a, **k):
        real_mkdir(self)  # the other rank's mkdir lands first
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(pathlib.Path, "mkdir", other_rank_first)
    assert check_writable(tmp_path / "rec" / "run.rank1.json") == tmp_path / "rec" / "run.rank1.json"
    assert (tmp_path / "rec").is_dir()  # not ours to remove


def test_check_writable_tries_again_when_another_process_removes_the_folder_under_its_probe(tmp_path, monkeypatch):
    """The other rank's clean-up removes the folder it made between this rank's look and its probe."""
    import perfkit.outputs as outputs

    (tmp_path / "rec").mkdir()
    real_probe, removed = outputs._probe, []

    def other_rank_cleans_up(folder):
        if not removed:
            folder.rmdir()
            removed.append(folder)
        return real_probe(folder)

    monkeypatch.setattr(outputs, "_probe", other_rank_cleans_up)
    assert check_writable(tmp_path / "rec" / "run.rank1.json") == tmp_path / "rec" / "run.rank1.json"
    assert removed and list(tmp_path.iterdir()) == []  # the second try made the folder, probed, removed it


def test_check_writable_gives_up_on_a_folder_that_keeps_disappearing(tmp_path, monkeypatch):
    import perfkit.outputs as outputs

    def always_gone(folder):
        folder.rmdir()
        return outputs.__dict__["_probe_real"](folder)

    monkeypatch.setitem(outputs.__dict__, "_probe_real", outputs._probe)
    monkeypatch.setattr(outputs, "_probe", always_gone)
    with pytest.raises(OutputError, match="keeps disappearing"):
        check_writable(tmp_path / "rec" / "run.json")


def test_ranks_checking_one_new_folder_together_all_pass(tmp_path):
    """The real race, in processes: 6 checkers of one new folder, 30 rounds; none may be refused."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(3) as pool:
        for i in range(30):
            folder = tmp_path / f"rec{i}"
            errors = pool.map(_check_in_a_process, [str(folder / f"run.rank{r}.json") for r in range(6)])
            assert errors == [None] * 6, errors


def _check_in_a_process(path):
    try:
        check_writable(path)
    except OutputError as e:
        return str(e)
    return None
