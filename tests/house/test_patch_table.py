"""One table per hook family: what ``install`` patches, what the restore check lists (``originals``) and
the fixes in words are all the same table."""

from __future__ import annotations

import importlib

import pytest

from perfkit.collectors import hub, patches


def _families():
    out = []
    for library, module in hub.FAMILIES:
        try:
            importlib.import_module(library)
        except ImportError:
            continue
        out.append(importlib.import_module(module))
    return out


@pytest.mark.parametrize("family", _families(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_install_patches_exactly_the_restore_list_and_undo_restores_it(family):
    before = family.originals()
    p = patches.Patcher()
    installed = family.install(p)
    try:
        after = family.originals()
        assert sorted(installed) == sorted(before), "install and the restore list disagree"
        patched = {(id(owner), name) for owner, name, _ in p._undo}
        assert len(patched) == len(installed)
        changed = [k for k in before if after[k] is before[k]]
        assert not changed, f"listed but not replaced: {changed}"
    finally:
        p.undo()
    assert all(family.originals()[k] is v for k, v in before.items())


def test_the_torch_table_covers_the_attributes_that_once_drifted():
    from perfkit.collectors import torch_sync

    keys = set(torch_sync.originals())
    for k in ("Tensor.__contains__", "Tensor.__array__", "Tensor.argwhere", "Tensor.unique_consecutive", "Tensor.equal",
              "Tensor.allclose", "argwhere", "unique_consecutive", "equal", "allclose"):
        assert k in keys


def test_fixes_come_from_the_table_for_every_reported_op():
    from perfkit.collectors import torch_sync

    ops = {p.op for p in torch_sync.PATCHES} | {op for p in torch_sync.PATCHES for op in p.also}
    assert set(torch_sync.FIXES) == ops and all(torch_sync.FIXES.values())
    assert "print(t)" in torch_sync.FIXES and 't[list] = v' in torch_sync.FIXES
