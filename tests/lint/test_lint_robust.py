"""Bad input never stops a run: each bad file gets one clear diagnostic and the rest is still linted."""

from __future__ import annotations

import time

from click.testing import CliRunner

from perfkit.cli.lint import lint
from perfkit.lint import lint_paths

HOT_BAD = "import torch\ndef step(t: torch.Tensor):\n    return t.item()\n"


def _errors_by_name(result):
    return {e.path.rsplit("/", 1)[-1]: e for e in result.errors}


def test_bad_files_get_a_diagnostic_and_the_run_continues(tmp_path):
    (tmp_path / "a_syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "b_latin1.py").write_bytes(b"x = '\xe9\xff'\n")  # not UTF-8, no coding cookie
    (tmp_path / "c_nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "d_cookie.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n" + HOT_BAD.encode())
    (tmp_path / "e_deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "f_good.py").write_text(HOT_BAD)
    (tmp_path / "g_empty.py").write_text("")
    (tmp_path / "h_bom.py").write_bytes(b"\xef\xbb\xbf" + HOT_BAD.encode())
    result = lint_paths([str(tmp_path)])
    errs = _errors_by_name(result)
    assert set(errs) == {"a_syntax.py", "b_latin1.py", "c_nul.py", "e_deep.py"}
    assert "syntax error" in errs["a_syntax.py"].message and errs["a_syntax.py"].line == 1
    assert "decode" in errs["b_latin1.py"].message
    # the cookie file, the good file and the BOM file were linted all the same
    assert sorted(v.path.rsplit("/", 1)[-1] for v in result.violations) == ["d_cookie.py", "f_good.py", "h_bom.py"]
    assert result.files == 4


def test_deep_but_parsable_nesting_is_a_diagnostic_not_a_crash(tmp_path):
    # a long operator chain parses but is deeper than a recursive walk can go
    (tmp_path / "chain.py").write_text("import torch\ndef step(t: torch.Tensor):\n    return " +
                                       " + ".join(["t"] * 30000) + "\n")
    (tmp_path / "ok.py").write_text(HOT_BAD)
    result = lint_paths([str(tmp_path)])
    assert [v.path.rsplit("/", 1)[-1] for v in result.violations] == ["ok.py"]
    assert len(result.errors) <= 1  # either analysed or reported, never raised


def test_huge_generated_file(tmp_path):
    body = "".join(f"    x{i} = t * {i}\n    y{i} = x{i}.sum()\n" for i in range(10000))
    (tmp_path / "huge.py").write_text("import torch\ndef step(t: torch.Tensor):\n" + body + "    return t.item()\n")
    start = time.perf_counter()
    result = lint_paths([str(tmp_path)])
    assert not result.errors
    assert [(v.rule, v.line) for v in result.violations] == [("PK101", 20003)]
    assert time.perf_counter() - start < 30  # linear, not quadratic (generous for a loaded CI box)


def test_directory_with_thousands_of_files(tmp_path):
    n = 2000
    for i in range(n):
        sub = tmp_path / f"d{i % 20}"
        sub.mkdir(exist_ok=True)
        (sub / f"m{i}.py").write_text(HOT_BAD if i % 100 == 0 else "def f(:\n" if i % 250 == 1 else "x = 1\n")
    (tmp_path / "d0" / "notes.txt").write_text("not python")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.py").write_text(HOT_BAD)
    result = lint_paths([str(tmp_path)])
    assert len(result.violations) == n // 100
    assert len(result.errors) == len([i for i in range(n) if i % 250 == 1 and i % 100 != 0])
    assert result.files == n - len(result.errors)


def test_cli_prints_a_diagnostic_per_bad_file_and_exits_1(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text("def f(:\n")
    (tmp_path / "good.py").write_text("x = 1\n")
    r = CliRunner().invoke(lint, ["."])
    assert r.exit_code == 1
    assert "bad.py:1:" in r.stderr and "cannot lint: syntax error" in r.stderr
    r = CliRunner().invoke(lint, ["good.py"])
    assert r.exit_code == 0


def test_a_crashing_rule_costs_one_file_not_the_run(tmp_path, monkeypatch):
    from perfkit.lint import registry

    def boom(ctx, node):
        if "boom" in ctx.mod.path:
            raise ValueError("bad rule")

    monkeypatch.setitem(registry.NODE_CHECKS, __import__("ast").Return,
                        registry.NODE_CHECKS.get(__import__("ast").Return, []) + [(boom, True)])
    (tmp_path / "boom.py").write_text(HOT_BAD)
    (tmp_path / "fine.py").write_text(HOT_BAD)
    result = lint_paths([str(tmp_path)])
    assert [e.path.rsplit("/", 1)[-1] for e in result.errors] == ["boom.py"]
    assert "internal error" in result.errors[0].message and "bad rule" in result.errors[0].message
    assert [v.path.rsplit("/", 1)[-1] for v in result.violations] == ["fine.py"]
