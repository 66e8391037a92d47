"""Issue 18.5: under ``perfkit profile`` a program runs as under plain ``python``: ``__file__``,
``sys.argv``, ``__spec__``, ``sys.path[0]``, the working directory and ``__main__``'s globals are
what this interpreter sets, field by field, in the script form (relative path, symlink) and the
``-m`` form; a script that changes directory and opens a file next to ``__file__`` works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''"""the probe's docstring"""
import json, os, sys
START = os.getcwd()
here = os.path.dirname(__file__)
os.chdir("/")
with open(os.path.join(here, "data.txt")) as f:  # next to the script, after a chdir
    data = f.read().strip()
g = globals()
main = sys.modules["__main__"]
loader = g.get("__loader__")
spec = g.get("__spec__")
print("PROBE " + json.dumps({
    "globals": sorted(k for k in g if k.startswith("__")),
    "types": {k: type(g[k]).__name__ for k in sorted(g) if k.startswith("__")},
    "__file__": g.get("__file__"), "__cached__": g.get("__cached__"), "__package__": g.get("__package__"),
    "__name__": __name__, "__doc__": __doc__, "__annotations__": g.get("__annotations__", "absent"),
    "__spec__": None if spec is None else [spec.name, spec.origin, spec.parent, spec.cached, type(spec.loader).__name__],
    "__loader__": None if loader is None else [type(loader).__name__, getattr(loader, "name", None), getattr(loader, "path", None)],
    "main_is_globals": main.__dict__ is g, "main_name": main.__name__,
    "argv": sys.argv, "path0": sys.path[0], "cwd_at_start": START, "data": data, "path": sys.path,
}))
'''


def _write(tmp_path: Path) -> Path:
    pkg = tmp_path / "proj" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "probe.py").write_text(PROBE)
    (pkg / "data.txt").write_text("next to the script\n")
    (tmp_path / "proj" / "data.txt").write_text("next to the script\n")  # __file__ of a symlink is the link
    (tmp_path / "proj" / "link.py").symlink_to(pkg / "probe.py")
    return tmp_path / "proj"


def _probe(cmd: list[str], cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([sys.executable, *cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


@pytest.mark.parametrize("form", [["pkg/probe.py", "a", "--b"], ["link.py", "x"], ["-m", "pkg.probe", "y"]],
                         ids=["relative-script", "symlinked-script", "module"])
def test_the_program_sees_what_plain_python_gives_it(tmp_path, form):
    proj = _write(tmp_path)
    plain = _probe(form, proj)
    profiled = _probe(["-m", "perfkit", "profile", "-q", "-o", str(tmp_path / "r.json"), *form], proj)
    assert plain["data"] == "next to the script"
    for key in plain:  # field by field: a difference names its field
        if key == "path":  # the directory perfkit was launched from stays reachable, last
            assert profiled[key][:len(plain[key])] == plain[key] and len(profiled[key]) <= len(plain[key]) + 1
            continue
        assert profiled[key] == plain[key], key
    assert plain["__file__"] == os.path.abspath(plain["__file__"])  # what the issue is about: absolute
    assert (tmp_path / "r.json").stat().st_size > 0
