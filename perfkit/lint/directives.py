"""In-source directives, read from comments without tokenizing the file.

* ``# perfkit: ignore[PK101,PK2]`` — suppress those rules (IDs or prefixes) on this line;
* ``# perfkit: ignore`` — suppress every rule on this line;
* ``# perfkit: ignore-file`` — skip the whole file;
* ``# perfkit: hot`` — on a ``def`` line (or the line above it / above its decorators): a hot path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DIRECTIVE = re.compile(r"#\s*perfkit:\s*(ignore-file|ignore|hot)\b(?:\[([^\]]*)\])?", re.IGNORECASE)
ALL = frozenset({"*"})


@dataclass
class Directives:
    ignores: dict = field(default_factory=dict)  # line -> frozenset of rule prefixes, or ALL
    hot_lines: set = field(default_factory=set)
    ignore_file: bool = False

    def suppressed(self, rule_id: str, first_line: int, last_line: int) -> bool:
        if not self.ignores:
            return False
        for line in range(first_line, max(first_line, last_line) + 1):
            codes = self.ignores.get(line)
            if codes is None:
                continue
            if codes is ALL or any(rule_id.startswith(c) for c in codes):
                return True
        return False


def parse(text: str) -> Directives:
    d = Directives()
    if "perfkit:" not in text and "PERFKIT:" not in text.upper():
        return d
    for lineno, line in enumerate(text.splitlines(), 1):
        if "#" not in line:
            continue
        for m in _DIRECTIVE.finditer(line):
            kind = m.group(1).lower()
            if kind == "hot":
                d.hot_lines.add(lineno)
            elif kind == "ignore-file":
                d.ignore_file = True
            else:
                codes = m.group(2)
                if codes is None or not codes.strip():
                    d.ignores[lineno] = ALL
                else:
                    prev = d.ignores.get(lineno)
                    if prev is ALL:
                        continue
                    new = frozenset(c.strip().upper() for c in codes.split(",") if c.strip())
                    d.ignores[lineno] = new | (prev or frozenset())
    return d
