"""Rule families, one per module: PK1xx syncs, PK2xx allocations, PK3xx per-env loops,
PK4xx measurement bugs, PK5xx stream hazards. Importing this package registers them all."""

from perfkit.lint.rules import allocs, loops, streams, syncs, timing  # noqa: F401
