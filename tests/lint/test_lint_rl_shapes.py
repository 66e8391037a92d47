"""General shapes of RL training code that the blind samples' missed per-step syncs share (`benchmarks/lint_blind4..7`,
"Known per-step syncs missed"): each rule is written for the shape, never for a codebase's names. Every positive case
fails on the linter before its rule (main at 326d69d), and each has its negative twin."""

from __future__ import annotations

from tests.lint.test_lint_reach import findings

# -- a nested tuple target binds its names -------------------------------------------------------------------------

_NESTED = """
    import torch

    def forward_all(model, x):
        return model(x), None

    class PPO:
        def __init__(self, model, opt):
            self.model, self.opt = model, opt

        def update(self, x):
            (dist, values), _ = forward_all(self.model, x)
            values = values.cpu().numpy()
            loss = dist.mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return values
    """


def test_a_name_bound_in_a_nested_tuple_is_not_its_own_later_result(tmp_path):
    # `(distribs, vs), _ = pack_and_forward(...)` then `vs = vs.cpu().numpy()`: the nested target binds `vs` (unknown
    # here), so the `.cpu()` reads what the forward returned, not the NumPy array it is about to become
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": _NESTED})
    assert ("ppo.py", 13, "PK102", "high") in got, got


def test_a_nested_tuple_of_host_values_stays_host(tmp_path):
    src = _NESTED.replace("(dist, values), _ = forward_all(self.model, x)",
                          "(dist, values), _ = forward_all(self.model, x)\n            values = values.numpy()")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/ppo.py": src})
    assert not [f for f in got if f[2] == "PK102"], got
