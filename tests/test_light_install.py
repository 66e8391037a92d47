"""The light core: `perfkit lint` runs with none of the heavy stack importable, and every command that
needs torch or an extra says so in one line (exit 2) before doing anything (issue 10, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("torch", "numpy", "pandas", "matplotlib", "jinja2", "rich", "tqdm", "nvtx", "warp", "mujoco", "mujoco_warp",
         "yaml")


def perfkit_without(blocked, *args, cwd=None):
    """``perfkit ARGS`` in a fresh interpreter where the ``blocked`` modules cannot be imported
    (``sys.modules[name] = None`` makes ``import name`` raise ImportError, as if not installed)."""
    code = ("import sys\n"
            f"for m in {tuple(blocked)!r}: sys.modules[m] = None\n"
            "from perfkit.cli import main\n"
            "main(sys.argv[1:], prog_name='perfkit')\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_lint_needs_nothing_heavy(tmp_path):
    src = tmp_path / "env.py"
    src.write_text("import torch\n\ndef step(x):\n    return x.sum().item()\n")
    p = perfkit_without(HEAVY, "lint", src)
    assert "Error" not in p.stderr and "ModuleNotFoundError" not in p.stderr, p.stderr
    assert p.returncode == 1 and "PK" in p.stdout  # the .item() finding
    clean = tmp_path / "clean.py"
    clean.write_text("def f(x):\n    return x + 1\n")
    assert perfkit_without(HEAVY, "lint", clean).returncode == 0


@pytest.mark.parametrize("args", [
    ["profile", "-o", "{tmp}/r.json", "examples/train.py"],
    ["sweep", "perfkit.envs:make_env", "--num-envs", "8", "-o", "{tmp}/sw"],
    ["probe", "--quick"],
])
def test_commands_that_need_torch_say_so(tmp_path, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = perfkit_without(("torch",), *args, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == f"Error: perfkit {args[0]} needs torch (pip install torch)"
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_a_missing_extra_is_named_with_its_install_line(tmp_path):
    p = perfkit_without(("matplotlib", "jinja2"), "report", "x.json", "-o", tmp_path / "rep")
    assert p.returncode == 2
    assert p.stderr.strip() == "Error: perfkit report needs matplotlib, jinja2 (pip install 'perfkit[report]')"
    p = perfkit_without(("torch", "numpy"), "profile", "examples/train.py", cwd=ROOT)
    assert p.stderr.strip() == ("Error: perfkit profile needs torch (pip install torch) and numpy "
                                "(pip install 'perfkit[profile]')")
    p = perfkit_without(("numpy",), "compare", "a.json", "b.json")
    assert p.returncode == 2 and "pip install 'perfkit[report]'" in p.stderr


def test_export_trace_needs_only_the_core(tmp_path):
    from perfkit.record import Run

    src = Run(command=["x"], num_envs=2, steps=2, step_times_ms=[1.0, 1.0]).save(tmp_path / "r.json")
    p = perfkit_without(HEAVY, "export-trace", src, "-o", tmp_path / "t.json")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "t.json").is_file()
