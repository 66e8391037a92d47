"""The console's sync lines: the lint rule that finds each sync statically (or the gap), and --verify both ways."""
from __future__ import annotations

from perfkit.record import EXTRA_VERIFY, Finding, Run
from perfkit.renderers.console import ConsoleRenderer


def _text(run: Run) -> str:
    return ConsoleRenderer(width=200).render(run)


def test_a_sync_names_its_lint_rule_or_the_gap_in_the_linter():
    run = Run(steps=10, findings=[
        Finding("sync", ".item()", "train.py", 3, count=10, per_step=1.0, lint_rule="PK101"),
        Finding("sync", "cuda_t.copy_(cpu_t)", "train.py", 4, count=10, per_step=1.0, lint_rule=None),
    ])
    out = _text(run)
    assert "PK101 finds this statically" in out
    assert "no static rule finds this sync (a gap in the linter)" in out


def test_verify_shows_unattributed_syncs_and_false_reports():
    ver = {"steps": 20, "runtime_syncs": 100, "hooked_syncs": 101, "hooked_without_runtime_sync": 1, "unattributed": 2,
           "sites": [{"site": "env.py:7", "op": "torch.tensor(list, device=cuda)", "hooked": 20, "runtime_syncs": 19,
                      "hooked_without_runtime_sync": 1}],
           "unattributed_sites": [{"site": "ppo.py:88", "function": "get_action", "count": 2,
                                   "apis": {"cudaStreamSynchronize": 2}}]}
    out = _text(Run(steps=20, extra={EXTRA_VERIFY: ver}))
    assert "100 runtime syncs in 20 steps (5/step), 101 hooked; 2 unattributed, 1 hooked without a runtime sync" in out
    assert "unattributed ppo.py:88 in get_action(): 2 (2 cudaStreamSynchronize)" in out
    assert "no runtime sync env.py:7 torch.tensor(list, device=cuda): 1 of 20 hooked calls" in out


def test_verify_shows_where_the_record_and_the_runtime_disagree_per_site():
    agreed = {"window": "the record's steady state", "steps": 72, "runtime_per_step": 5.0, "record_per_step": 4.5,
              "ratio": 0.9, "tolerance": 0.05, "sites_outside_tolerance": 1,
              "sites": [{"site": "ppo.py:9", "runtime_per_step": 4.0, "record_per_step": 3.5, "ratio": 0.875},
                        {"site": "env.py:7", "runtime_per_step": 1.0, "record_per_step": 1.0, "ratio": 1.0}]}
    ver = {"steps": 72, "runtime_syncs": 360, "hooked_syncs": 360, "hooked_without_runtime_sync": 0, "unattributed": 0,
           "agreement": agreed}
    out = _text(Run(steps=72, extra={EXTRA_VERIFY: ver}))
    assert "record 4.5 vs runtime 5 syncs/step over 72 steps (the record's steady state); 1 of 2 sites outside ±5%" in out
    assert "disagrees ppo.py:9: record 3.5/step, runtime 4/step" in out and "disagrees env.py:7" not in out
