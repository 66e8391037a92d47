"""probes/sync_ops.py on a machine without CUDA: its cases cover every sometimes-syncing row of the
patch table, its table is built from measurements, and it refuses to run without a GPU, saying why."""
from __future__ import annotations

import ast

import pytest

from perfkit.collectors import torch_sync
from perfkit.probes import sync_ops


def test_every_sometimes_row_and_each_of_its_ops_has_a_case():
    rows = {p.key: p for p in torch_sync.PATCHES}
    sometimes = {k for k, p in rows.items() if not p.always}
    assert sometimes <= {c.row for c in sync_ops.CASES}
    for key in sometimes:
        wanted = {op.label for op in rows[key].ops}
        assert wanted <= {c.op for c in sync_ops.CASES if c.row == key}, key


@pytest.mark.parametrize("case", sync_ops.CASES, ids=lambda c: c.name)
def test_each_case_names_an_op_of_its_row_and_compiles(case):
    row = next(p for p in torch_sync.PATCHES if p.key == case.row)
    assert case.op in {op.label for op in row.ops}
    ast.parse(case.stmt)


def test_the_table_marks_disagreements():
    ok = sync_ops.row_of(sync_ops.CASES[0], {"per_call": 1.0, "by_api": {}}, 1.0, 1.0, ["t[list]"])
    bad = sync_ops.row_of(sync_ops.CASES[1], {"per_call": 0.0, "by_api": {}}, 0.0, 1.0, ["t[list]"])
    err = {"name": "x", "error": "RuntimeError: boom"}
    text = sync_ops.table([ok, bad, err])
    assert ok["agree"] and not bad["agree"]
    assert "<-- disagrees" in text.splitlines()[3] and "<-- disagrees" not in text.splitlines()[2]
    assert "error: RuntimeError: boom" in text and "1 of 3 cases agree" in text


def test_without_cuda_it_says_why_and_writes_nothing(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert sync_ops.main(["--out", str(tmp_path / "o")]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
