"""Rule families, one per module: PK1xx syncs, PK2xx allocations, PK3xx per-env loops,
PK4xx measurement bugs, PK5xx stream hazards. Importing this package registers them all; it is
also the rule catalog (every family loaded)."""

from perfkit.lint.registry import lookup, registered_rules
from perfkit.lint.rules import allocs, loops, streams, syncs, timing  # noqa: F401


def all_rules() -> list:
    """Every rule, by ID."""
    return registered_rules()


def get_rule(rule_id: str):
    """The rule with this ID (case-insensitive). Raises KeyError."""
    return lookup(rule_id)
