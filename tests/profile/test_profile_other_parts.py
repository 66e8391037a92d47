"""What "other" is made of: the training loop's own code read from its source (collectors/regions.py),
the nested breakdown of other (snapshot.segment_stats) and which nested parts are kept (the
discovery window's dominance rule)."""
from __future__ import annotations

import types

import pytest

from perfkit.collectors import regions
from perfkit.collectors.patches import Patcher
from perfkit.collectors.steps import Discovery, StepClock
from perfkit.collectors.steps import ClockSummary
from perfkit.collectors.timing import SegmentSummary
from perfkit.profile.snapshot import Snapshot, segment_stats

LOOP = '''
def train(envs, agent, optimizer, writer, args):
    next_obs = envs.reset()
    for iteration in range(args.iterations):
        for step in range(args.num_steps):
            obs_buf = next_obs
            with torch.no_grad():
                action, logprob = agent.act(next_obs)
            scale = args.scale
            next_obs, reward, done, infos = envs.step(action.cpu().numpy())
            if "episode" in infos:
                for r in infos["episode"]:
                    print("return", r)
                    writer.add_scalar("charts/return", r, step)
        kl = None
        for epoch in range(args.epochs):
            loss, kl = agent.loss(obs_buf)
            optimizer.zero_grad()
            loss.backward()
            writer.add_scalar("losses/loss", loss.item(), iteration)
            optimizer.step()
        if kl > args.target_kl:
            break
        explained = float(kl.cpu())
        wandb.log({"explained": explained})
        loss_dict = agent.update()
        logger.log(loss_dict)
    return next_obs
'''


@pytest.fixture
def loop_code(tmp_path):
    path = tmp_path / "inline_loop.py"
    path.write_text(LOOP)
    ns: dict = {}
    exec(compile(LOOP, str(path), "exec"), ns)
    return ns["train"].__code__, LOOP.splitlines()


def _segments_by_line(code, lines, step_call="envs.step(") -> dict[str, set]:
    step_line = next(i for i, t in enumerate(lines, 1) if step_call in t and i >= code.co_firstlineno)
    table = regions.table_for(code, step_line, frozenset({"step"}))
    out: dict[str, set] = {}
    for i, (line, *_rest) in enumerate(code.co_positions()):
        if line is not None and 2 * i in table:
            out.setdefault(lines[line - 1].strip(), set()).add(table[2 * i])
    return out


def test_the_loops_own_statements_get_the_segment_of_their_place(loop_code):
    by = _segments_by_line(*loop_code)
    expect = {
        "action, logprob = agent.act(next_obs)": {"policy"},  # assigns what env.step reads
        "next_obs, reward, done, infos = envs.step(action.cpu().numpy())": {"policy"},  # its arguments only
        'print("return", r)': {"logging"},
        'writer.add_scalar("charts/return", r, step)': {"logging"},
        'for r in infos["episode"]:': {"logging"},  # a compound statement of logging statements only
        "loss, kl = agent.loss(obs_buf)": {"learner"},  # the statement that calls backward / optimizer.step
        "optimizer.zero_grad()": {"learner"},
        'writer.add_scalar("losses/loss", loss.item(), iteration)': {"logging"},  # innermost wins
        "explained = float(kl.cpu())": {"logging"},  # only a logger reads it
        'wandb.log({"explained": explained})': {"logging"},
        "loss_dict = agent.update()": {"learner"},  # calls an update (a logger reads its result: still learner)
    }
    for stmt, segs in expect.items():
        assert by.get(stmt) == segs, (stmt, by.get(stmt))
    for stmt in ("obs_buf = next_obs", "scale = args.scale", "if kl > args.target_kl:", "next_obs = envs.reset()"):
        assert stmt not in by, (stmt, by[stmt])
    # the env.step call itself is not policy: only the instructions of its arguments
    assert "other" not in {s for v in by.values() for s in v}


def test_outside_reads_the_loop_frames_instruction_and_names_the_rest(loop_code):
    code, _ = loop_code
    seen = []

    class Envs:
        def reset(self):
            return 0

        def step(self, a):
            seen.append(("step", regions.outside()))
            return 0, 0, False, {}

    class Agent:
        def act(self, obs):
            seen.append(("act", regions.outside()))
            return _T(), 0

    class _T:
        def cpu(self):
            seen.append(("cpu", regions.outside()))
            return self

        def numpy(self):
            return 0

    fn = types.FunctionType(code, {"torch": __import__("torch"), "print": print})
    args = types.SimpleNamespace(iterations=1, num_steps=1, scale=1, epochs=0, target_kl=0)
    regions.install(code, regions.table_for(code, 10, frozenset({"step"})), regions.loop_label(code))
    try:
        with pytest.raises(TypeError):  # `kl > target_kl` with kl None: the loop ends there
            fn(Envs(), Agent(), None, None, args)
    finally:
        regions.clear()
    assert seen == [("act", "policy"), ("cpu", "policy"), ("step", "other/train")]
    assert regions.outside() == "other"  # cleared: no loop known


def test_other_parts_nest_and_fold_into_their_totals():
    segs = SegmentSummary(totals={"other": 0.004, "other/A": 0.008, "other/A/B": 0.02, "other/C": 0.004, "policy": 0.01},
                          calls={"other/A": 4, "other/A/B": 4, "other/C": 4})
    snap = Snapshot(clock=ClockSummary(step_times=[0.01] * 4), segments=segs)
    stats = segment_stats(snap, steady=4, n_steps=4)
    other = stats["other"]
    assert set(other.children) == {"A", "C"}
    assert set(other.children["A"].children) == {"B"}
    assert other.children["A"].children["B"].cpu_ms_per_step == pytest.approx(5.0)
    assert other.children["A"].cpu_ms_per_step == pytest.approx(2.0 + 5.0)  # its own time and B's
    assert other.cpu_ms_per_step == pytest.approx(1.0 + 7.0 + 1.0)
    assert "other/A" not in stats and "other/A/B" not in stats


def test_only_parts_under_a_dominant_part_are_kept():
    d = Discovery(StepClock(1, lambda *a: None), Patcher(), True, {})
    a, b, a1, a2, a1x, b1 = (compile(f"{n} = 0", n, "exec") for n in ("a", "b", "a1", "a2", "a1x", "b1"))  # distinct codes
    d._parent = {a: "step", b: "step", a1: a, a2: a, a1x: a1, b1: b}
    d._callee_time = {a: 0.9, b: 0.1, a1: 0.3, a2: 0.6, a1x: 0.3, b1: 0.1}
    assert d._kept(a1) and d._kept(a2)  # a took 90 % of the step's parts
    assert not d._kept(b1)  # b did not dominate
    assert not d._kept(a1x)  # a dominated, but a1 (1/3 of a's parts) did not


def test_sb3s_action_sampling_is_policy_back_to_the_policy_call():
    """SB3's collect_rollouts: the action reaches env.step through `actions = actions.cpu().numpy()` and
    `clipped_actions = ...`: each statement it is made from is policy; `callback.update_locals(...)` and
    `self._update_info_buffer(...)` are not updates."""
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    code = OnPolicyAlgorithm.collect_rollouts.__code__
    import linecache

    lines = [t.rstrip("\n") for t in linecache.getlines(code.co_filename)]
    by = _segments_by_line(code, lines, "env.step(clipped_actions)")
    for stmt in ("actions, values, log_probs = self.policy(obs_tensor)", "actions = actions.cpu().numpy()",
                 "clipped_actions = actions"):
        assert by.get(stmt) == {"policy"}, (stmt, by.get(stmt))
    assert "callback.update_locals(locals())" not in by and "self._update_info_buffer(infos, dones)" not in by
