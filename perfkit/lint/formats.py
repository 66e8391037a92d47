"""Output formats: text (ruff/flake8 style), json (a list of findings), sarif (2.1.0), github (annotations)."""

from __future__ import annotations

import json
from collections import Counter
from urllib.parse import quote

from perfkit.lint.registry import RANK
from perfkit.lint.rules import all_rules

FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(fmt: str, violations, errors=(), files: int = 0) -> str:
    if fmt == "text":
        return text(violations, files)
    if fmt == "json":
        return json.dumps([v.to_json() for v in violations] + [e.to_json() for e in errors], indent=1) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(violations, errors), indent=1) + "\n"
    if fmt == "github":
        return github(violations, errors)
    raise ValueError(f"unknown format {fmt!r}")


def text(violations, files: int = 0) -> str:
    lines = [f"{v.path}:{v.line}:{v.col}: {v.rule} {v.message}" + ("" if v.confidence == "high" else f" [{v.confidence}]")
             for v in violations]
    if violations:
        by_cat = Counter(v.category for v in violations)
        cats = ", ".join(f"{n} {c}" for c, n in sorted(by_cat.items()))
        n = len(violations)
        lines.append(f"Found {n} finding{'s' if n != 1 else ''} ({cats}) in {files} file{'s' if files != 1 else ''} "
                     f"checked. `perfkit lint --explain PKxxx` says why and how to fix.")
    return "\n".join(lines) + ("\n" if lines else "")


def _sarif_level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def _uri(path: str) -> str:
    return quote(path.replace("\\", "/"), safe="/:._-~")


def sarif(violations, errors=()) -> dict:
    from perfkit import __version__

    from perfkit.lint.docs import explain_markdown

    rules = all_rules()
    index = {r.id: i for i, r in enumerate(rules)}
    driver = {
        "name": "perfkit-lint",
        "fullName": "perfkit lint: static GPU sync-point linter",
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [
            {
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.summary.replace("`", "")},
                "fullDescription": {"text": r.rationale.replace("`", "")},
                "help": {"text": f"{r.rationale}\n\nFix: {r.fix}", "markdown": explain_markdown(r)},
                "defaultConfiguration": {"level": _sarif_level(r.severity)},
                "properties": {"tags": ["performance", r.category], "category": r.category},
            }
            for r in rules
        ],
    }
    results = []
    for v in violations:
        region = {"startLine": v.line, "startColumn": v.col}
        if v.end_line >= v.line and v.end_col > 0:
            region["endLine"] = v.end_line
            if v.end_line > v.line or v.end_col > v.col:
                region["endColumn"] = v.end_col
            else:
                region.pop("endLine")
        results.append({
            "ruleId": v.rule,
            "ruleIndex": index.get(v.rule, -1),
            "level": _sarif_level(v.severity),
            "message": {"text": v.message},
            "rank": RANK.get(v.confidence, 50.0) * 1.0,
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(v.path), "uriBaseId": "%SRCROOT%"},
                "region": region,
            }}],
            "properties": {"category": v.category, "confidence": v.confidence},
        })
    notes = [
        {"level": "error", "message": {"text": f"cannot lint: {e.message}"},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e.path), "uriBaseId": "%SRCROOT%"}}}]}
        for e in errors
    ]
    run = {
        "tool": {"driver": driver},
        "results": results,
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": not errors, "toolExecutionNotifications": notes}],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _esc_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


def github(violations, errors=()) -> str:
    out = []
    for v in violations:
        level = "error" if v.severity == "error" else "warning"
        out.append(f"::{level} file={_esc_prop(v.path)},line={v.line},col={v.col},title={v.rule}::"
                   f"{_esc_data(v.message)}")
    for e in errors:
        out.append(f"::error file={_esc_prop(e.path)},title=perfkit lint::{_esc_data('cannot lint: ' + e.message)}")
    return "\n".join(out) + ("\n" if out else "")
