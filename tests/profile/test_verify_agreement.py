"""The record's syncs per step against the CUDA runtime's over the same steps, per site
(perfkit.profile.verify_agreement): one-off and data-dependent sites agree when the verify window is
the record's steady state, the last step is read by the record's rule, and a disagreement shows."""

from __future__ import annotations

from perfkit.profile.verify_agreement import agreement, runtime_rates
from perfkit.record import Finding


def _sync(site: str, per_step: float, would: bool = False) -> Finding:
    path, line = site.rsplit(":", 1)
    return Finding(kind="sync", op=".item()", path=path, line=int(line), per_step=per_step, would_sync_on_gpu=would)


def _block(by_step, first=6, last=77, with_run=True):
    return {"by_step": by_step, "first_step": first, "last_step": last, "ended_with_run": with_run}


def test_a_one_off_checkpoint_agrees_over_the_record_steady_state():
    """rsl_rl's torch.save at the end of learn(): 59 runtime syncs once; over a 24-step window it read
    0.667 or 1.333 of the record's rate by where the window fell (the H200, last session)."""
    by_step = {"runner.py:141": {30: 59}, "ppo.py:7": {i: 1 for i in range(6, 78)}}
    a = agreement(_block(by_step), [_sync("runner.py:141", 59 / 72), _sync("ppo.py:7", 1.0)], rate_first_step=6)
    rows = {s["site"]: s for s in a["sites"]}
    assert rows["runner.py:141"]["ratio"] == 1.0 and rows["ppo.py:7"]["ratio"] == 1.0
    assert a["steps"] == 72 and a["sites_outside_tolerance"] == 0 and a["ratio"] == 1.0
    assert a["window"] == "the record's steady state"


def test_the_last_step_is_read_by_the_records_rule():
    # the last step (77) ran on to the end: a site counts there at most its most in one earlier step,
    # and a site seen only there (the final save, the script's closing synchronize) is teardown
    by_step = {"a.py:1": {6: 2, 40: 1, 77: 5}, "b.py:2": {77: 3}}
    assert runtime_rates(by_step, 6, 77, open_last=True) == {"a.py:1": 5 / 72}
    assert runtime_rates(by_step, 6, 77, open_last=False) == {"a.py:1": 8 / 72, "b.py:2": 3 / 72}


def test_steps_cut_from_the_records_rate_window_are_left_out():
    by_step = {"a.py:1": {6: 4, 7: 4, 8: 1, 9: 1}}
    a = agreement(_block(by_step, first=6, last=9, with_run=True), [_sync("a.py:1", 1.0)], rate_first_step=8)
    assert (a["first_step"], a["steps"]) == (8, 2) and a["sites"][0]["ratio"] == 1.0


def test_a_window_closed_before_the_run_ended_is_read_as_it_is():
    by_step = {"a.py:1": {6: 1, 7: 1, 8: 3}}
    a = agreement(_block(by_step, first=6, last=8, with_run=False), [_sync("a.py:1", 1.0)], rate_first_step=20)
    assert a["first_step"] == 6 and a["sites"][0]["runtime_per_step"] == round(5 / 3, 4)
    assert a["window"].startswith("the verify window")


def test_disagreements_both_ways_are_counted_and_gpu_only_would_syncs_left_out():
    by_step = {"a.py:1": {6: 1, 7: 1}, "lib.py:3": {6: 1}}
    a = agreement(_block(by_step, last=7), [_sync("a.py:1", 0.5), _sync("c.py:9", 1.0), _sync("d.py:4", 3.0, would=True)],
                  rate_first_step=6)
    rows = {s["site"]: s for s in a["sites"]}
    assert rows["a.py:1"]["ratio"] == 0.5  # the record under-counts
    assert rows["lib.py:3"]["ratio"] == 0.0  # the runtime synced where the record has nothing
    assert rows["c.py:9"]["ratio"] is None  # the record counts a sync the runtime never made
    assert "d.py:4" not in rows and a["sites_outside_tolerance"] == 3
    assert rows["lib.py:3"]["runtime_steps"] == {"6": 1} and "runtime_steps" not in rows.get("x", {})


def test_no_step_no_agreement():
    assert agreement({"steps": 0}, [], 6) is None


def test_a_last_step_site_seen_before_only_in_the_warm_up_reads_as_the_record_reads_it():
    """The scripts' own torch.cuda.synchronize() after the warm-up learn() and after the timed one: the
    window saw it only in the last step (the H200: record 0.0139/step, runtime 0); the record caps that
    step by the warm-up's typical step, and so does the agreement, from the record's warm-up count."""
    by_step = {"train.py:102": {96: 1}, "x.py:1": {96: 2}}
    assert runtime_rates(by_step, 25, 96, open_last=True, warm={"train.py:102": 1}) == {"train.py:102": 1 / 72}
    a = agreement(_block(by_step, first=25, last=96), [_sync("train.py:102", 1 / 72)], 25, warm={"train.py:102": 1})
    assert a["sites_outside_tolerance"] == 0 and a["sites"][0]["ratio"] == 1.0


def test_a_window_closed_before_the_run_ended_is_set_beside_the_records_own_syncs_in_its_steps():
    """The H200, the manager env, 16 iterations under --verify: the window was 72 of ~360 steady steps, and
    a reset site (2/step in the window, 2.35 over the run), a site the window never saw synced at (0.35 over
    the run) and rsl_rl's checkpoint save (59 syncs at one boundary of the window's) read 1.17, 'false' and
    0.4 against the runtime while both sides counted the same syncs step by step. With the record's own
    syncs in the window's steps each reads 1.0."""
    from types import SimpleNamespace

    from perfkit.profile.snapshot import _window_record

    by_step = {"events.py:18": {i: 2 for i in range(25, 97)}, "runner.py:141": {48: 59}}
    whole_run = [_sync("events.py:18", 2.3472), _sync("managers.py:404", 0.3472), _sync("runner.py:141", 0.3278)]

    def key(site: str, would: bool = False) -> tuple:
        path, line = site.rsplit(":", 1)
        return ("sync", ".item()", path, int(line), "f", None, would, "steady")

    trails = {i: {key("events.py:18"): 2} for i in range(25, 97)}
    trails[48][key("runner.py:141")] = 59
    trails[100] = {key("managers.py:404"): 25}  # after the window: not its steps
    trails[30][key("cpu.py:1", would=True)] = 4  # a would-sync: the runtime makes none
    snap = SimpleNamespace(clock=SimpleNamespace(kept_trails=trails))
    window = _window_record(snap, 25, 96)
    assert window == {"events.py:18": 2.0, "runner.py:141": 59 / 72}

    a = agreement(_block(by_step, first=25, last=96, with_run=False), whole_run, rate_first_step=25,
                  window_record=window)
    rows = {s["site"]: s for s in a["sites"]}
    assert {s: r["ratio"] for s, r in rows.items()} == {"events.py:18": 1.0, "runner.py:141": 1.0}
    assert a["sites_outside_tolerance"] == 0 and a["window"].endswith("the record's syncs in its steps")
    # without the trails (past the kept steps) the whole run's rates stand in, as before
    assert _window_record(snap, 25, 5000) is None
    before = agreement(_block(by_step, first=25, last=96, with_run=False), whole_run, rate_first_step=25)
    assert before["sites_outside_tolerance"] == 3
