"""``perfkit lint`` on the command line: formats, exit status, suppressions, config, baseline, --explain."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from perfkit.cli.lint import lint

BAD = textwrap.dedent('''\
    import torch

    class Env:
        def __init__(self, n):
            self.x = torch.zeros(n, device="cuda")

        def step(self, a: torch.Tensor):
            v = self.x.sum().item()
            if (self.x > 0).any():
                self.x.zero_()
            return v
''')
CLEAN = textwrap.dedent('''\
    import torch

    def step(x: torch.Tensor):
        x.add_(1.0)
        return x
''')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


def run(*args):
    return CliRunner().invoke(lint, list(args), catch_exceptions=False)


def test_text_output_and_exit_1(tree):
    r = run("pkg")
    assert r.exit_code == 1
    assert "pkg/bad.py:8:13: PK101 " in r.output
    assert "pkg/bad.py:9:12: PK103 " in r.output
    assert "Found 2 findings" in r.output


def test_clean_exit_0(tree):
    r = run("pkg/clean.py")
    assert r.exit_code == 0, r.output
    assert "PK" not in r.stdout


def test_json_schema(tree):
    r = run("pkg", "--format", "json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert [d["rule"] for d in data] == ["PK101", "PK103"]
    for d in data:
        assert set(d) == {"path", "line", "col", "rule", "category", "message", "severity", "confidence"}
        assert d["confidence"] in ("high", "medium", "low")
        assert d["category"] in {"sync", "alloc", "loop", "timing", "stream"}
        assert d["path"] == "pkg/bad.py" and d["severity"] in ("warning", "error")


def test_sarif_is_2_1_0_with_rules_and_relative_locations(tree):
    r = run("pkg", "--format", "sarif")
    doc = json.loads(r.stdout)
    assert doc["version"] == "2.1.0" and "sarif-2.1.0" in doc["$schema"]
    run0 = doc["runs"][0]
    rules = run0["tool"]["driver"]["rules"]
    ids = [x["id"] for x in rules]
    assert "PK101" in ids and "PK501" in ids
    for rule in rules:
        assert rule["shortDescription"]["text"] and rule["help"]["text"] and rule["fullDescription"]["text"]
    res = run0["results"]
    assert [x["ruleId"] for x in res] == ["PK101", "PK103"]
    loc = res[0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "pkg/bad.py"
    assert loc["region"]["startLine"] == 8 and loc["region"]["startColumn"] == 13
    assert ids[res[0]["ruleIndex"]] == "PK101"
    assert res[0]["level"] in ("warning", "error", "note")


def test_sarif_validates_against_the_schema_shape(tree):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {  # the parts of SARIF 2.1.0 GitHub code scanning requires
        "type": "object", "required": ["version", "runs"],
        "properties": {"runs": {"type": "array", "items": {"type": "object", "required": ["tool", "results"],
            "properties": {"results": {"type": "array", "items": {"type": "object",
                "required": ["message", "locations", "ruleId"]}}}}}}}
    jsonschema.validate(json.loads(run("pkg", "--format", "sarif").stdout), schema)


def test_github_annotations(tree):
    r = run("pkg", "--format", "github")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("::warning file=pkg/bad.py,line=8,col=13,title=PK101::")
    assert "sync" in lines[0] or "`.item()`" in lines[0]
    assert len(lines) == 2


def test_select_and_ignore(tree):
    assert "PK103" not in run("pkg", "--select", "PK101").output
    assert "PK101" not in run("pkg", "--ignore", "PK101").output
    r = run("pkg", "--select", "PK2")
    assert r.exit_code == 0
    r = run("pkg", "--select", "PK1", "--ignore", "PK101,PK103")
    assert r.exit_code == 0


def test_bad_codes_are_usage_errors(tree):
    r = CliRunner().invoke(lint, ["pkg", "--select", "E501"])
    assert r.exit_code == 2 and "not a rule ID" in r.output


def test_usage_errors_exit_2(tree):
    assert CliRunner().invoke(lint, []).exit_code == 2
    assert CliRunner().invoke(lint, ["pkg", "--format", "xml"]).exit_code == 2
    r = CliRunner().invoke(lint, ["--explain", "PK999"])
    assert r.exit_code == 2 and "PK101" in r.output
    r = CliRunner().invoke(lint, ["pkg", "--baseline", "missing.json"])
    assert r.exit_code == 2 and "missing.json" in r.output
    r = CliRunner().invoke(lint, ["pkg", "--config", "nope.toml"])
    assert r.exit_code == 2


def test_missing_path_is_reported_and_the_run_continues(tree):
    r = run("nope.py", "pkg")
    assert r.exit_code == 1
    assert "nope.py" in r.stderr and "no such file" in r.stderr
    assert "PK101" in r.stdout


def test_explain(tree):
    r = run("--explain", "pk106")
    assert r.exit_code == 0
    assert r.output.startswith("PK106 data-dependent-shape")
    assert "Why:" in r.output and "Fix:" in r.output and "nonzero" in r.output


def test_suppression_comments(tree):
    src = BAD.replace(".item()", ".item()  # perfkit: ignore[PK101]").replace(
        ".any():", ".any():  # perfkit: ignore")
    (tree / "pkg" / "bad.py").write_text(src)
    assert run("pkg").exit_code == 0
    src = BAD.replace(".item()", ".item()  # perfkit: ignore[PK2, PK103]")
    (tree / "pkg" / "bad.py").write_text(src)
    assert "PK101" in run("pkg").output
    (tree / "pkg" / "bad.py").write_text("# perfkit: ignore-file\n" + BAD)
    assert run("pkg").exit_code == 0


def test_pyproject_config(tree):
    (tree / "pyproject.toml").write_text(textwrap.dedent('''\
        [tool.perfkit.lint]
        ignore = ["PK103"]
        hot = ["helper"]
        exclude = ["skipme"]
    '''))
    (tree / "pkg" / "helper.py").write_text("import torch\ndef helper(t: torch.Tensor):\n    return t.item()\n")
    (tree / "skipme").mkdir()
    (tree / "skipme" / "x.py").write_text(BAD)
    r = run("pkg", "skipme")
    assert "PK103" not in r.output
    assert "pkg/helper.py:3:12: PK101" in r.output
    assert "skipme" not in r.output


def test_bad_pyproject_is_a_usage_error(tree):
    (tree / "pyproject.toml").write_text("[tool.perfkit.lint]\nselect = 3\n")
    r = CliRunner().invoke(lint, ["pkg"])
    assert r.exit_code == 2 and "select" in r.output
    (tree / "pyproject.toml").write_text("[tool.perfkit.lint]\nbogus = 1\n")
    r = CliRunner().invoke(lint, ["pkg"])
    assert r.exit_code == 2 and "bogus" in r.output
    (tree / "pyproject.toml").write_text("[tool.perfkit.lint\n")
    assert CliRunner().invoke(lint, ["pkg"]).exit_code == 2


def test_baseline_roundtrip(tree):
    r = run("pkg", "--write-baseline", "base.json")
    assert r.exit_code == 0
    assert json.loads((tree / "base.json").read_text())["schema"] == "perfkit.lint-baseline/1"
    assert run("pkg", "--baseline", "base.json").exit_code == 0
    # moving code around does not resurface baselined findings; a new finding does
    src = "\n\n" + BAD.replace("        return v", "        w = self.x.cpu()\n        return v")
    (tree / "pkg" / "bad.py").write_text(src)
    r = run("pkg", "--baseline", "base.json", "--format", "json")
    assert r.exit_code == 1
    assert [d["rule"] for d in json.loads(r.stdout)] == ["PK102"]


def test_corrupt_baseline_is_a_usage_error(tree):
    (tree / "base.json").write_text("{not json")
    assert CliRunner().invoke(lint, ["pkg", "--baseline", "base.json"]).exit_code == 2
    (tree / "base.json").write_text('{"schema": "other"}')
    assert CliRunner().invoke(lint, ["pkg", "--baseline", "base.json"]).exit_code == 2


def test_real_console_script_exit_status(tree):
    p = subprocess.run([sys.executable, "-m", "perfkit", "lint", "pkg/bad.py", "--format", "json"],
                       capture_output=True, text=True, cwd=tree)
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)[0]["rule"] == "PK101"
    p = subprocess.run([sys.executable, "-m", "perfkit", "lint", "pkg/clean.py"], capture_output=True, text=True,
                       cwd=tree)
    assert p.returncode == 0, p.stderr


def test_import_perfkit_lint_does_not_import_torch():
    code = ("import sys, perfkit.lint, perfkit.cli.lint; from perfkit.lint import lint_source; "
            "lint_source('import torch\\ndef step(t: torch.Tensor):\\n    return t.item()\\n'); "
            "assert 'torch' not in sys.modules and 'warp' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pre_commit_hook_entry():
    import pathlib

    text = (pathlib.Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "id: perfkit-lint" in text and "entry: perfkit lint" in text and "types_or: [python, pyi]" in text


def test_columns_count_characters_not_bytes():
    from perfkit.lint import lint_source

    src = "import torch\ndef step(t: torch.Tensor):\n    é = 'ünïcödé'; v = t.item()\n"
    (v,) = lint_source(src)
    assert (v.line, v.col) == (3, src.splitlines()[2].index("t.item()") + 1)


def test_exclude_patterns_are_relative_to_the_config_file(tree, monkeypatch):
    (tree / "pyproject.toml").write_text('[tool.perfkit.lint]\nexclude = ["pkg/bad.py"]\n')
    assert run("pkg").exit_code == 0
    monkeypatch.chdir(tree / "pkg")  # same config found upwards, same meaning
    assert run(".").exit_code == 0
    assert run("bad.py").exit_code == 0


# -- usage errors in the one error style (perfkit/cli/errors.py): `Error: ...`, exit 2, no traceback ------

def test_unknown_rule_code_is_a_usage_error(tree):
    for args, code in ((["pkg", "--select", "PK999"], "PK999"), (["pkg", "--ignore", "PK7"], "PK7"),
                       (["pkg", "--select", "PK101,PK998"], "PK998")):
        r = CliRunner().invoke(lint, args)
        assert r.exit_code == 2, (args, r.output)
        assert r.output.startswith("Error: ") and code in r.output, r.output
        assert "Traceback" not in r.output
    (tree / "pyproject.toml").write_text('[tool.perfkit.lint]\nselect = ["PK1", "PK404"]\n')
    r = CliRunner().invoke(lint, ["pkg"])
    assert r.exit_code == 2 and "PK404" in r.output
    assert run("pkg", "--select", "PK1", "--config", "none.toml").exit_code == 2  # a missing explicit config


def test_unwritable_baseline_is_one_error_line_exit_2(tree):
    r = CliRunner().invoke(lint, ["pkg", "--write-baseline", str(tree / "pkg" / "bad.py" / "dir" / "base.json")])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "base.json" in lines[0], r.output
    assert "Traceback" not in r.output


def test_files_that_cannot_be_linted_are_in_json_and_sarif(tree):
    (tree / "pkg" / "broken.py").write_text("def f(:\n")
    r = run("pkg", "--format", "json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    errors = [d for d in data if d["rule"] is None]
    assert [(d["path"], d["category"], d["severity"]) for d in errors] == [("pkg/broken.py", "error", "error")]
    assert "syntax error" in errors[0]["message"] and errors[0]["line"] == 1
    assert [d["rule"] for d in data if d["rule"]] == ["PK101", "PK103"]
    doc = json.loads(run("pkg", "--format", "sarif").stdout)
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    notes = inv["toolExecutionNotifications"]
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes] == ["pkg/broken.py"]


def test_sarif_rank_and_min_confidence(tree):
    # forward: hot by its name alone, so an unknown receiver stays medium (in step() it would be high)
    (tree / "pkg" / "unknown.py").write_text("import torch\nclass E:\n    def forward(self, a):\n        return self.buf.item()\n")
    doc = json.loads(run("pkg", "--format", "sarif").stdout)
    ranks = {(x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], x["ruleId"]): x["rank"]
             for x in doc["runs"][0]["results"]}
    assert ranks == {("pkg/bad.py", "PK101"): 90.0, ("pkg/bad.py", "PK103"): 90.0, ("pkg/unknown.py", "PK101"): 60.0}
    high = json.loads(run("pkg", "--format", "json", "--min-confidence", "high").stdout)
    assert [d["path"] for d in high] == ["pkg/bad.py", "pkg/bad.py"]


def test_the_lint_path_needs_no_torch_warp_or_mujoco(tree):
    # torch, warp and mujoco blocked from import: `import torch` raises ImportError
    code = ("import sys\n"
            "for m in ('torch', 'warp', 'mujoco', 'mujoco_warp', 'numpy'):\n"
            "    sys.modules[m] = None\n"
            "from perfkit.cli.lint import lint\n"
            "sys.argv = ['perfkit lint', 'pkg', '--format', 'json']\n"
            "lint()\n")
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree, env=env, timeout=60)
    assert p.returncode == 1, p.stderr
    assert [d["rule"] for d in json.loads(p.stdout)] == ["PK101", "PK103"]


def test_write_baseline_creates_its_folder_as_other_commands_do(tree):
    r = run("pkg", "--write-baseline", "nodir/sub/b.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tree / "nodir" / "sub" / "b.json").read_text())["schema"] == "perfkit.lint-baseline/1"


@pytest.mark.parametrize("target", ["pkg/bad.py", "./pkg/../pkg/bad.py", "link.py"])
def test_write_baseline_over_a_linted_file_is_refused_and_writes_nothing(tree, target):
    (tree / "link.py").symlink_to(tree / "pkg" / "bad.py")
    before = (tree / "pkg" / "bad.py").read_text()
    for args in (["pkg", "--write-baseline", target], ["pkg/bad.py", "--write-baseline", target]):
        r = CliRunner().invoke(lint, args)
        assert r.exit_code == 2 and r.output.startswith("Error: ") and "being linted" in r.output, r.output
        assert (tree / "pkg" / "bad.py").read_text() == before


def test_an_empty_folder_or_a_fifo_is_an_error_not_all_clear(tree):
    import os

    (tree / "empty").mkdir()
    r = CliRunner().invoke(lint, ["empty"])
    assert r.exit_code == 2 and "no Python files" in r.output and "All clear" not in r.output, r.output
    os.mkfifo(tree / "fifo")
    r = CliRunner().invoke(lint, ["fifo"])
    assert r.exit_code == 1 and "fifo: cannot lint: not a regular file" in r.output, r.output
    assert "All clear" not in r.output
