"""One-off costs kept small (issue 23.3): a library function's aliases are replaced in one pass over the
loaded modules however many are wrapped together, a module imported while a replacement is in place
gets it and gives it back, and source paths are resolved folder by folder."""

from __future__ import annotations

import os
import sys
import types

import pytest

from perfkit.collectors.patches import Patcher
from perfkit.collectors.segment_rules import SegmentRules
from perfkit.source import real_path, relpath


@pytest.fixture
def passes(monkeypatch):
    """How many passes over the loaded modules' globals the patchers make."""
    n = []
    orig = Patcher._replace_holders

    def counted(self, wanted):
        n.append(len(wanted))
        return orig(self, wanted)

    monkeypatch.setattr(Patcher, "_replace_holders", counted)
    return n


def test_known_library_targets_are_wrapped_everywhere_in_one_pass(passes):
    mujoco = pytest.importorskip("mujoco")
    import mujoco.rollout

    holder = types.ModuleType("_pk_holder_of_mj_step")
    holder.step, holder.rollout = mujoco.mj_step, mujoco.rollout.rollout  # `from mujoco import mj_step as step`
    sys.modules[holder.__name__] = holder
    p = Patcher()
    try:
        SegmentRules(p).install()
        # mj_step and rollout (and warp's capture_launch where warp is loaded): one pass for all (was one each)
        assert len(passes) == 1 and passes[0] >= 2
        assert holder.step is mujoco.mj_step and holder.step.__perfkit_segment__ == "physics"
        assert holder.rollout is mujoco.rollout.rollout and holder.rollout.__perfkit_segment__ == "physics"
    finally:
        p.undo()
        del sys.modules[holder.__name__]
    assert not hasattr(holder.step, "__perfkit_segment__") and not hasattr(mujoco.mj_step, "__perfkit_segment__")


def test_a_module_imported_while_patched_gets_the_replacement_and_gives_it_back():
    def f():
        return 1

    owner = types.ModuleType("_pk_owner")
    owner.f = f
    sys.modules["_pk_owner"] = owner
    p = Patcher()
    try:
        with p.batch():
            p.set_everywhere(owner, "f", "first")
        p.set_everywhere(owner, "f", "second")  # a replacement replaced again
        later = types.ModuleType("_pk_later")
        exec("from _pk_owner import f", later.__dict__)  # imported after the pass: reads the owner
        sys.modules["_pk_later"] = later
        assert later.f == "second"
        p.undo()
        assert owner.f is f and later.f is f  # the module imported since holds the original again
    finally:
        sys.modules.pop("_pk_owner", None)
        sys.modules.pop("_pk_later", None)


def test_paths_resolve_as_realpath_does(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    (real_dir / "mod.py").write_text("")
    (tmp_path / "other.py").write_text("")
    (tmp_path / "linked").symlink_to(real_dir)  # a folder that is a link
    (real_dir / "alias.py").symlink_to(tmp_path / "other.py")  # a file that is a link
    for p in [real_dir / "mod.py", tmp_path / "linked" / "mod.py", tmp_path / "linked" / "alias.py",
              tmp_path / "linked" / ".." / "other.py", tmp_path / "missing" / "x.py", "relative/x.py", "x.py"]:
        assert real_path(str(p)) == os.path.realpath(str(p)), p
    assert relpath(str(tmp_path / "linked" / "mod.py"), str(tmp_path)) == os.path.join("real", "mod.py")
