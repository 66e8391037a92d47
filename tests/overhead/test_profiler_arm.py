"""python -m perfkit.overhead.profiler_arm: the program runs as it would plainly (argv, sys.path[0],
exit status), inside torch.profiler, which is stopped and reported before the process ends, also when
the program ends it with os._exit."""

from __future__ import annotations

import ast
import subprocess

from _overhead_helpers import PY


def test_a_module_run_under_torch_profiler_that_ends_with_os_exit(tmp_path, child_env):
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        "import os, sys, torch\n"
        "x = torch.ones(4)\n"
        "for _ in range(5):\n"
        "    x = x * 2\n"
        "print(repr(sys.argv))\n"
        "print(repr(sys.path[0]))\n"
        "print(f'SPS: {float(x.sum()):.1f}')\n"  # not flushed: the arm flushes before os._exit
        "os._exit(5)\n")
    p = subprocess.run([PY, "-m", "perfkit.overhead.profiler_arm", "-m", "pkgx.job", "a", "--b"], cwd=tmp_path,
                       env=child_env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 5, p.stderr
    argv, path0, sps = p.stdout.splitlines()
    argv = ast.literal_eval(argv)
    assert argv[0].endswith("job.py") and argv[1:] == ["a", "--b"]
    assert ast.literal_eval(path0) == str(tmp_path)  # as python -m: the working directory first
    assert sps == "SPS: 128.0"
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("torch.profiler: ") and int(last.split()[1]) > 0, p.stderr


def test_usage_without_a_target(child_env):
    p = subprocess.run([PY, "-m", "perfkit.overhead.profiler_arm"], env=child_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith("usage: ")
