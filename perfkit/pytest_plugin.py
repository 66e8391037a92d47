"""pytest plugin (``pytest11`` entry point ``perfkit``): make "env.step is sync-free" a one-line test.

    def test_step_is_sync_free(perfkit_budget, env, actions):
        perfkit_budget.check(env.step, actions, syncs=0, allocs=0)

or, for a block of code::

    def test_reset(perfkit_budget, env):
        with perfkit_budget(syncs=0, allocs=0):
            env.reset()

A call over budget fails the test with :class:`perfkit.BudgetExceeded`, which lists every offending
site (``path:line  op  count``). On a CPU-only machine the same calls on CPU tensors are counted as
would-sync-on-GPU, so these tests gate syncs in CI without a GPU.

Nothing heavy is imported until the fixture is used: loading this plugin costs every pytest run nothing.
"""

from __future__ import annotations

import pytest


class BudgetFixture:
    """What the ``perfkit_budget`` fixture returns: call it for a context manager, or ``check`` a call."""

    def __call__(self, syncs: int | None = None, allocs: int | None = None):
        from perfkit.collectors.budget import budget

        return budget(syncs=syncs, allocs=allocs)

    def check(self, fn, *args, syncs: int | None = 0, allocs: int | None = None, **kwargs):
        """Call ``fn(*args, **kwargs)`` under a budget (default: zero syncs) and return its result."""
        with self(syncs=syncs, allocs=allocs):
            return fn(*args, **kwargs)


@pytest.fixture
def perfkit_budget() -> BudgetFixture:
    """Budget syncs / allocations of a block: ``with perfkit_budget(syncs=0, allocs=0): env.step(a)``."""
    return BudgetFixture()
