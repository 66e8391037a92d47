"""Packaging: the wheel's layout (probes/ ships as perfkit.probes), the light core, every package listed."""

from __future__ import annotations

import email
import os
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
