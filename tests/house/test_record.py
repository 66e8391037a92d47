"""The run record's schema: /3 with typed blocks, /2 and /1 records (committed under reports/) still read
and migrated with every fact kept."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest

from perfkit.record import MOVED_TO_BLOCKS, SCHEMA, OutsideSteps, Pricing, Run, Timeline, migrate

ROOT = Path(__file__).resolve().parents[2]
OLD_RECORDS = [
    "reports/stacks-h200/profile/record.json",  # /2, a GPU profile with teardown syncs and sync waits
    "reports/price-validation-h200/profiles/n256-none.json",  # /2, a loop priced with loop_ops
    "reports/overhead-h200/train-256-perfkit-r1.json",  # /2
    "reports/train-vs-naive-h200/train_naive.json",  # /1
    "reports/sweeps-h200/sweep-ant/points/4096.json",  # /1, a sweep point with a session pass
]
_ONCE = {"total_steps", "warmup_steps", "sampled_steps"}  # facts /2 kept twice


def kept(old, new) -> bool:
    """Every fact of ``old`` is in ``new`` with its value (``new`` may add fields an older perfkit did not
    write, at their defaults)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and kept(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(kept(a, b) for a, b in zip(old, new))
    return old == new


@pytest.mark.parametrize("rel", OLD_RECORDS)
def test_an_old_record_is_read_as_the_current_schema_with_every_fact_kept(rel, tmp_path):
    path = ROOT / rel
    old = json.loads(path.read_text())
    assert old["schema"] in ("perfkit.run/1", "perfkit.run/2")
    run = Run.load(path)
    assert run.schema == SCHEMA
    new = run.to_dict()
    for key, value in old.items():
        if key in ("schema", "extra"):
            continue
        if key == "env":  # the env block no longer repeats the run's num_envs
            assert {k: v for k, v in value.items() if k != "num_envs"} == new["env"]
            assert value.get("num_envs", old["num_envs"]) == new["num_envs"]
            continue
        assert kept(value, new[key]), key
    extra = old.get("extra") or {}
    for key, value in extra.items():
        if key in MOVED_TO_BLOCKS:
            block, name = MOVED_TO_BLOCKS[key]
            assert new[block][name] == value, key
            assert key not in run.extra
        elif key in ("total_steps", "warmup_steps"):
            assert new[key] == value and key not in run.extra
        elif key == "sampled_steps":
            assert run.sampling["steps"] == value and key not in run.extra
        else:
            assert run.extra[key] == value, key
    # saved again, it reads back the same
    assert Run.load(run.save(tmp_path / "again.json")).to_dict() == new


def test_the_blocks_of_an_old_record_are_typed_and_read_where_they_are_used():
    run = Run.load(ROOT / "reports/stacks-h200/profile/record.json")
    assert isinstance(run.timeline, Timeline) and run.timeline.spans and run.timeline.step_starts_ms
    assert isinstance(run.outside_steps, OutsideSteps) and run.outside_steps.teardown
    assert isinstance(run.pricing, Pricing) and run.pricing.prices["source_of"]
    from perfkit.renderers.perfetto import to_trace

    assert to_trace(run)["otherData"]["source"] == "timeline"  # export-trace reads the typed timeline


def test_migrate_leaves_its_input_alone_and_a_current_record_as_it_is():
    old = json.loads((ROOT / OLD_RECORDS[0]).read_text())
    kept = copy.deepcopy(old)
    new = migrate(old)
    assert old == kept and new is not old and new["schema"] == SCHEMA
    assert migrate(new) is new


def test_a_repeated_fact_that_disagrees_is_not_the_same_fact_and_stays():
    d = Run(steps=5, num_envs=8, total_steps=10, warmup_steps=5, sampling={"steps": [6]}).to_dict()
    d["schema"] = "perfkit.run/2"
    d["env"] = {"num_envs": 16}  # not the run's 8
    d["extra"] = {"total_steps": 11, "warmup_steps": 5, "sampled_steps": [6, 7]}
    run = Run.from_dict(d)
    assert run.env == {"num_envs": 16} and run.total_steps == 10 and run.warmup_steps == 5
    assert run.extra == {"total_steps": 11, "sampled_steps": [6, 7]}


def test_a_block_of_the_wrong_type_is_refused_with_its_name():
    from perfkit.record import RecordError

    d = Run(steps=1).to_dict()
    d["timeline"] = {"spans": "soon"}
    with pytest.raises(RecordError, match="timeline.spans"):
        Run.from_dict(d, "r.json")
    d["timeline"] = []
    with pytest.raises(RecordError, match="'timeline'"):
        Run.from_dict(d, "r.json")


def test_a_new_record_stores_no_fact_twice():
    from perfkit.collectors.sampling import SampleSummary, ScheduleSummary
    from perfkit.collectors.steps import ClockSummary
    from perfkit.collectors.timing import SegmentSummary
    from perfkit.profile.snapshot import Snapshot, build_run

    clock = ClockSummary(total_steps=12, step_times=[0.01] * 8, step_starts=[float(i) for i in range(12)],
                         last_step_end=12.5)
    spans = [{"step": 3, "segment": "other", "start_ms": 1.0, "dur_ms": 2.0, "gpu": False}]
    snap = Snapshot(command=["t.py"], warmup_steps=2, num_envs=4, env={"name": "toy", "device": "cpu"}, clock=clock,
                    schedule=ScheduleSummary(weights={3: 31}), sampling=SampleSummary(steps=[3]),
                    segments=SegmentSummary(timeline=spans))
    d = build_run(snap).to_dict()
    assert d["schema"] == SCHEMA and d["total_steps"] == 12 and d["warmup_steps"] == 2 and d["num_envs"] == 4
    assert "num_envs" not in d["env"] and d["sampling"]["steps"] == [3]
    assert not {*_ONCE, *MOVED_TO_BLOCKS} & set(d["extra"])
    assert d["timeline"]["spans"][0]["step"] == 3 and d["timeline"]["last_step_end_ms"] == 12.5


# ---- the registry of extra keys ---------------------------------------------------------------------

SOURCES = [*sorted((ROOT / "perfkit").rglob("*.py")), *sorted((ROOT / "scripts").rglob("*.py")),
           *sorted((ROOT / "benchmarks").rglob("*.py"))]


def _is_extra(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "extra"


def _extra_uses():
    """``(writes, reads)``: ``[(file, key node)]`` of every key written into a run's ``extra`` (``x.extra[k] =``,
    ``x.extra.setdefault(k, ...)``, ``x.extra.update({k: ...})``) and ``{EXTRA_* name: {files}}`` of every
    other use of a registered name."""
    writes, reads = [], {}
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        written = set()
        for node in ast.walk(tree):
            keys = []
            if isinstance(node, ast.Subscript) and _is_extra(node.value) and isinstance(node.ctx, ast.Store):
                keys = [node.slice]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_extra(node.func.value):
                if node.func.attr == "setdefault" and node.args:
                    keys = [node.args[0]]
                elif node.func.attr == "update" and node.args and isinstance(node.args[0], ast.Dict):
                    keys = list(node.args[0].keys)
            writes += [(path.relative_to(ROOT), k) for k in keys]
            written |= {id(k) for k in keys}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.startswith("EXTRA_") and id(node) not in written:
                reads.setdefault(node.id, set()).add(str(path.relative_to(ROOT)))
    return writes, reads


def test_every_extra_key_written_is_a_registered_name():
    import perfkit.record as record

    writes, _ = _extra_uses()
    assert writes, "the scan finds the writes"
    bad = [f"{path}:{k.lineno} {ast.unparse(k)}" for path, k in writes
           if not (isinstance(k, ast.Name) and k.id.startswith("EXTRA_") and hasattr(record, k.id))]
    assert not bad, f"extra keys written without their EXTRA_* name in perfkit/record.py: {bad}"


def test_every_registered_extra_key_is_written_and_read_somewhere():
    import perfkit.record as record

    writes, reads = _extra_uses()
    written = {k.id for _, k in writes if isinstance(k, ast.Name)}
    names = {k for k in vars(record) if k.startswith("EXTRA_") and k != "EXTRA_KEYS"}
    assert {getattr(record, k) for k in names} == record.EXTRA_KEYS
    assert not names - written, f"registered, never written: {sorted(names - written)}"
    unread = sorted(k for k in names if not reads.get(k, set()) - {"perfkit/record.py"}
                    and k != "EXTRA_UNKNOWN_FIELDS")  # written back by Run.to_dict: a newer record loses nothing
    assert not unread, f"written, read by nothing: {unread}"
