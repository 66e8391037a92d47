"""The rule registry: one :class:`Rule` per ID, declared next to its check in ``rules/``.

``--explain``, ``docs/lint-rules.md`` and the SARIF rule table are all rendered from these objects,
so a rule's rationale and fix are written exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CATEGORIES = ("sync", "alloc", "loop", "timing", "stream")
SEVERITIES = ("error", "warning")


@dataclass(frozen=True)
class Rule:
    id: str  # "PK101"
    name: str  # kebab-case short name, "item-call"
    category: str  # one of CATEGORIES
    summary: str  # one line: what is reported
    message: str  # the finding's message (str.format fields allowed); always says the fix
    rationale: str  # why it costs, in a few sentences
    fix: str  # how to fix it
    bad: str = ""  # a short example that is reported
    good: str = ""  # the fixed version
    hot_only: bool = True  # reported only on hot paths (PK4xx/PK5xx apply everywhere)
    severity: str = "warning"
    setup_ok: bool = False  # not reported in __init__ (and, with --all, setup-named functions): there it is the point
    tags: tuple = field(default=())

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.id}: unknown category {self.category!r}")
        if self.category == "alloc":
            object.__setattr__(self, "setup_ok", True)
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.id}: unknown severity {self.severity!r}")


RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.id in RULES:
        raise ValueError(f"rule {rule.id} registered twice")
    RULES[rule.id] = rule
    return rule


def all_rules() -> list[Rule]:
    _load()
    return [RULES[k] for k in sorted(RULES)]


def get_rule(rule_id: str) -> Rule:
    _load()
    key = rule_id.strip().upper()
    if key not in RULES:
        raise KeyError(rule_id)
    return RULES[key]


def matches(rule_id: str, patterns) -> bool:
    """Whether ``rule_id`` is named by one of ``patterns`` (full IDs or prefixes: ``PK1``, ``PK10``)."""
    return any(rule_id.startswith(p) for p in patterns)


def _load():
    # Importing the rule families registers their rules.
    from perfkit.lint import rules  # noqa: F401
