"""Baselines: adopt the linter gradually by recording today's findings and reporting only new ones.

A finding is matched by (path, rule, the text of its source line), not by line number, so edits
elsewhere in a file do not resurface baselined findings; duplicates are matched by count.
"""

from __future__ import annotations

import json
from collections import Counter

SCHEMA = "perfkit.lint-baseline/1"


class BaselineError(ValueError):
    pass


def _key(v) -> tuple:
    return (v["path"], v["rule"], v.get("source", ""))


def write(path: str, violations) -> int:
    """Record ``violations`` at ``path`` (its folder created; written atomically, see perfkit.outputs)."""
    from perfkit.outputs import write_text

    entries = [{"path": v.path, "rule": v.rule, "line": v.line, "source": v.source} for v in violations]
    write_text(path, json.dumps({"schema": SCHEMA, "findings": entries}, indent=1) + "\n")
    return len(entries)


def load(path: str) -> Counter:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as e:
        raise BaselineError(f"cannot read baseline {path!r}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BaselineError(f"baseline {path!r} is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("findings"), list):
        raise BaselineError(f"baseline {path!r} is not a {SCHEMA} file (write one with --write-baseline)")
    try:
        return Counter(_key(e) for e in data["findings"])
    except (KeyError, TypeError) as e:
        raise BaselineError(f"baseline {path!r} has a malformed entry: {e}") from None


def filter_new(violations, known: Counter) -> list:
    """The violations not covered by the baseline."""
    left = Counter(known)
    out = []
    for v in violations:
        k = (v.path, v.rule, v.source)
        if left[k] > 0:
            left[k] -= 1
        else:
            out.append(v)
    return out
