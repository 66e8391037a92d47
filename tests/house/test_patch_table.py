"""One table per hook family: what ``install`` patches, what the restore check lists (``originals``) and
the fixes in words are all the same table."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from perfkit.collectors.cuda_syncs import RUNTIME_OPS

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


def _all_families():
    """Every family module (importing one does not import its library)."""
    return [importlib.import_module(module) for _, module in hub.FAMILIES]


def _rows():
    return [(fam.__name__.rsplit(".", 1)[-1], p) for fam in _all_families() for p in fam.PATCHES]


# ops no lint rule finds statically: a gap in the linter the report names; a new one must be added here
LINT_GAPS = {"index(t)", "x in t", "t[ndarray]", "t[cpu_idx]", "t[ndarray] = v", "cpu_t.copy_(cuda_t)", "cuda_t.copy_(cpu_t)",
             ".copy_(...)", "sync (runtime)"}


def _check_op(op):
    from perfkit.lint.registry import lookup
    from perfkit.lint.rules import all_rules

    all_rules()
    assert isinstance(op, patches.SyncOp), op
    assert op.kind in patches.SYNC_KINDS, f"{op.label}: kind {op.kind!r}"
    assert op.price in ("d2h", "h2d", "round trip"), f"{op.label}: no price kind"
    assert op.fix.strip(), f"{op.label}: no fix"
    if op.lint_rule is None:
        assert op.label in LINT_GAPS, f"{op.label}: no lint rule, and not a known gap of the linter"
    else:
        assert lookup(op.lint_rule).category == "sync", f"{op.label}: {op.lint_rule} is not a sync rule"


@pytest.mark.parametrize("family,row", _rows(), ids=lambda x: x if isinstance(x, str) else x.key)
def test_every_row_says_its_kind_price_fix_lint_rule_and_whether_it_always_syncs(family, row):
    assert isinstance(row.always, bool)
    for op in row.ops:
        _check_op(op)


@pytest.mark.parametrize("label", sorted(RUNTIME_OPS))
def test_every_name_of_a_runtime_reported_sync_says_its_kind_price_fix_and_lint_rule(label):
    _check_op(RUNTIME_OPS[label])


def test_the_known_lint_gaps_are_ops_of_the_table():
    assert LINT_GAPS <= set(hub.sync_ops())
    assert all(hub.sync_op(op).lint_rule is None for op in LINT_GAPS)


def test_fixes_and_ops_come_from_the_one_registry_of_families():
    # the tables' rows, and the names of syncs the CUDA runtime reports where no row's hook ran
    ops = {**RUNTIME_OPS, **{op.label: op for fam in _all_families() for p in fam.PATCHES for op in p.ops}}
    assert hub.sync_ops() == ops
    assert hub.fixes() == {label: op.fix for label, op in ops.items()}
    assert "print(t)" in hub.fixes() and "t[list] = v" in hub.fixes() and "wp.array.list()" in hub.fixes()


def test_the_session_reads_the_family_list_from_the_hub():
    # one list of families: the session takes its fixes from hub, it names no family module itself
    src = (Path(__file__).resolve().parents[2] / "perfkit" / "profile" / "session.py").read_text()
    assert "torch_sync" not in src and "warp_sync" not in src


@pytest.mark.parametrize("family", _families(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_always_only_installs_exactly_the_always_rows(family):
    always = family.originals(always_only=True)
    assert set(always) == {p.key for p in family.PATCHES if p.always} & set(family.originals())
    p = patches.Patcher()
    try:
        assert sorted(family.install(p, always_only=True)) == sorted(always)
    finally:
        p.undo()


def test_the_sometimes_rows_are_the_ones_that_decide_from_the_call():
    from perfkit.collectors import torch_sync

    sometimes = {p.key for p in torch_sync.PATCHES if not p.always}
    assert sometimes == {"Tensor.__getitem__", "Tensor.__setitem__", "Tensor.to", "Tensor.copy_", "Tensor.cuda", "tensor",
                         "where", "Tensor.repeat_interleave", "repeat_interleave"}
