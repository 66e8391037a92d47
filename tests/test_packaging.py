"""Packaging: the wheel's layout (probes/ ships as perfkit.probes), the light core, every package listed."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_is_listed():
    from setuptools import find_namespace_packages

    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    on_disk = set(find_namespace_packages(str(ROOT), include=["perfkit*"])) | {"perfkit.probes"}
    assert listed == on_disk
    assert pyproject()["tool"]["setuptools"]["package-dir"] == {"perfkit.probes": "probes"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the tree (the build leaves build/ and *.egg-info where it runs)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("perfkit", "probes"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                        str(src)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (whl,) = out.glob("perfkit-*.whl")
    return whl


def test_the_wheel_ships_probes_inside_perfkit(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "perfkit/probes/__init__.py" in names and "perfkit/probes/sync.py" in names
    assert not [n for n in names if n.startswith("probes/")]  # no top-level package in site-packages
    assert "perfkit/data/h200-profile.json" in names and "perfkit/renderers/templates/report.html.j2" in names
    top = next(n for n in names if n.endswith("top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top).decode().split() == ["perfkit"]


def test_perfkit_probes_imports_from_the_installed_wheel(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # -I -S: no PYTHONPATH, no site-packages (no other perfkit, no editable finder): only the wheel
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import perfkit.probes as p, perfkit.probes.pyloop as m; "
            "print(p.__file__); print(m.__file__); print(sorted(p.PROBES))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(site)], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(site / "perfkit" / "probes" / "__init__.py")
    assert lines[1] == str(site / "perfkit" / "probes" / "pyloop.py")
    assert "pyloop" in lines[2]


def test_the_core_install_is_light(wheel):
    meta = email.message_from_bytes(zipfile.ZipFile(wheel).read("perfkit-0.1.0.dist-info/METADATA"))
    core = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(r.split(";")[0].split(">")[0].split("=")[0].strip() for r in core) == ["click", "tomli"]
    heavy = [r for r in meta.get_all("Requires-Dist") if r.split(">")[0].split(";")[0].strip() in
             ("torch", "warp-lang", "mujoco", "mujoco-warp")]
    assert heavy and all("extra ==" in r for r in heavy)
    assert not any(r.startswith("torch") for r in meta.get_all("Requires-Dist"))  # the user's own build


def test_the_source_checkout_resolves_perfkit_probes_to_top_level_probes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", "import perfkit.probes as p; print(p.__file__)"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROOT / "probes" / "__init__.py")


def _closure(dist: str, extras: tuple[str, ...] = ()) -> set[str]:
    """``dist`` and every distribution it requires (with ``extras``), transitively, as installed here."""
    import re
    from importlib import metadata

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    seen: set[str] = set()
    done: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(dist, extras)]
    while todo:
        name, ex = todo.pop()
        if (norm(name), ex) in done:
            continue
        done.add((norm(name), ex))
        seen.add(norm(name))
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for req in reqs:
            spec, _, marker = req.partition(";")
            m = re.match(r"\s*([A-Za-z0-9_.-]+)(\[([^\]]*)\])?", spec)
            wanted = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if wanted and not set(wanted) & set(ex):
                continue
            if marker.strip() and not wanted:
                try:
                    from packaging.markers import Marker

                    if not Marker(marker).evaluate():
                        continue
                except Exception:
                    pass
            todo.append((m.group(1), tuple(x.strip() for x in (m.group(3) or "").split(",") if x.strip())))
    return seen


def test_every_package_a_test_imports_comes_with_the_test_extra():
    """A fresh virtualenv gets every third-party module a test imports from the README's install line
    (``pip install torch==2.13.0 -e '.[test]'``): imports found in tests/ and in the examples they run must belong to torch or to a
    distribution that ``perfkit[test]`` requires, directly or through its own requirements. Modules
    installed by hand on this machine do not count (CI once passed only because they were there)."""
    import ast
    import re
    from importlib import metadata

    local = {p.stem for p in ROOT.rglob("*.py")} | {p.name for p in ROOT.rglob("*") if p.is_dir()}
    imported: dict[str, str] = {}
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]):
        if "corpus" in path.parts:
            continue  # the linter's corpus is read as text, never imported
        try:
            tree = ast.parse(path.read_text(), str(path))
        except SyntaxError:
            continue  # the linter's corpus holds deliberately broken files
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local and top != "perfkit":
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    provided = _closure("perfkit", ("test",)) | _closure("torch")
    by_module = metadata.packages_distributions()
    missing = {}
    for mod, where in sorted(imported.items()):
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in by_module.get(mod, [])}
        if not dists & provided:
            missing[mod] = (where, sorted(dists) or "not installed here")
    assert not missing, f"imported by tests but not installed by perfkit[test]: {missing}"


def test_ci_runs_the_readme_test_command_in_a_fresh_virtualenv():
    """CI is the README's second set-up command, run verbatim inside a virtualenv made for the run."""
    readme = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(readme) == 2 and re.search(r"python3 -m pytest -q( -n \d+)?$", readme[1])
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme[1] in ci
    venv = next(i for i, line in enumerate(ci) if line.startswith("python3 -m venv"))
    activate = next(i for i, line in enumerate(ci) if "/bin/activate" in line and line.lstrip().startswith("."))
    assert venv < activate < ci.index(readme[1])
    assert "--system-site-packages" not in "\n".join(ci)


def test_import_perfkit_leaves_the_import_system_as_it_was(tmp_path):
    """A profiler must not change its host's import system: no finder on sys.meta_path or hook on
    sys.path_hooks, while ``perfkit.probes`` still resolves to the checkout's ``probes/``."""
    code = ("import sys; before = (list(map(repr, sys.meta_path)), list(map(repr, sys.path_hooks)));"
            "import perfkit, perfkit.probes.pyloop as m;"
            "after = (list(map(repr, sys.meta_path)), list(map(repr, sys.path_hooks)));"
            "print(before == after); print(m.__file__)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr
    same, where = out.stdout.split()
    assert same == "True" and where == str(ROOT / "probes" / "pyloop.py")
