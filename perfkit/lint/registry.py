"""The rule registry: one :class:`Rule` per ID, declared next to its check in ``rules/``, and the
table of *checks* (functions the engine calls on AST nodes or once per unit).

Imports run one way: the rule families (``perfkit.lint.rules``) import this module to register
themselves; the engine imports this module and the rule package; this module imports neither.
``--explain``, ``docs/lint-rules.md`` and the SARIF rule table are all rendered from these objects,
so a rule's rationale and fix are written exactly once. The full catalog (every family loaded) is
``perfkit.lint.rules.all_rules()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CATEGORIES = ("sync", "alloc", "loop", "timing", "stream")
SEVERITIES = ("error", "warning")
CONFIDENCES = ("high", "medium", "low")
# SARIF result.rank (0-100) per confidence: CI can gate on rank >= 70 (high only)
RANK = {"high": 90, "medium": 60, "low": 30}


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


NODE_CHECKS: dict = {}  # ast type -> [(fn, everywhere)]
UNIT_CHECKS: list = []  # (fn(ctx), prefilter) run once per unit (every unit)


def check(*node_types, everywhere: bool = False):
    """Register ``fn(ctx, node)`` for these node types (hot paths only unless ``everywhere``)."""

    def deco(fn):
        for t in node_types:
            NODE_CHECKS.setdefault(t, []).append((fn, everywhere))
        return fn

    return deco


def unit_check(prefilter=None):
    """Register ``fn(ctx)``, run once per unit (module top level and each function).

    ``prefilter(mod)`` -> the set of units worth checking (cheap, e.g. from a text search); None: all.
    """

    def deco(fn):
        UNIT_CHECKS.append((fn, prefilter))
        return fn

    return deco


def registered_rules() -> list[Rule]:
    """The rules registered so far, by ID (``perfkit.lint.rules.all_rules()`` loads every family first)."""
    return [RULES[k] for k in sorted(RULES)]


def lookup(rule_id: str) -> Rule:
    key = rule_id.strip().upper()
    if key not in RULES:
        raise KeyError(rule_id)
    return RULES[key]


def matches(rule_id: str, patterns) -> bool:
    """Whether ``rule_id`` is named by one of ``patterns`` (full IDs or prefixes: ``PK1``, ``PK10``)."""
    return any(rule_id.startswith(p) for p in patterns)
