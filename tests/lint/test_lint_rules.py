"""Every rule: a positive case (reported) and a negative case (quiet), plus the type inference behind them."""

from __future__ import annotations

import pytest

from perfkit.lint import all_rules
from .helpers import findings, in_step, rules_of

# (rule, snippet in a hot `step` that must be reported, snippet that must stay quiet)
CASES = [
    ("PK101", "v = self.x.sum().item()", "v = np.float32(3.0).item() if False else self.scale"),
    ("PK101", "loss = torch.nn.functional.mse_loss(self.x, a)\nv = loss.item()", "v = self.x.sum()"),
    ("PK102", "h = self.x.cpu()", "h = self.x.to('cpu', non_blocking=True)"),
    ("PK102", "h = self.x.detach().cpu().numpy()", "h = self.x.numpy()"),  # .numpy() raises on CUDA: no sync
    ("PK102", "h = self.x.tolist()", "h = [1, 2].copy()"),
    ("PK102", "h = self.x.to('cpu')", "h = self.x.to(torch.float16)"),
    ("PK102", "h = np.asarray(self.x.cpu())", "h = np.asarray(self.x)"),  # np.asarray raises on CUDA too
    ("PK103", "if self.m.any():\n    pass", "if self.scale > 1.0:\n    pass"),
    ("PK103", "while (self.x > 0).any():\n    self.x.sub_(1)", "for _ in range(self.decimation):\n    pass"),
    ("PK103", "assert (self.x >= 0).all()", "assert self.scale > 0"),
    ("PK103", "ok = self.m.all() and self.scale > 0", "ok = self.scale > 0 and self.decimation > 1"),
    ("PK103", "bad = not self.m.any()", "bad = not self.envs"),
    ("PK103", "b = bool(self.m[0])", "b = bool(self.envs)"),
    ("PK104", "s = float(self.x.max())", "s = float(self.scale)"),
    ("PK104", "n = int(self.m.sum())", "n = int(self.decimation)"),
    ("PK104", "same = torch.allclose(self.x, a)", "same = torch.isclose(self.x, a)"),
    ("PK104", "r = math.sqrt(self.x.sum())", "r = math.sqrt(self.scale)"),
    ("PK105", "print(self.x)", "print('step', self.scale)"),
    ("PK105", "msg = f'{self.x.mean()}'", "msg = f'{self.scale}'"),
    ("PK105", "msg = 'x=%s' % self.x", "msg = 'x=%s' % self.scale"),
    ("PK105", "s = str(self.x)", "s = str(self.scale)"),
    ("PK106", "ids = self.m.nonzero()", "ids = np.nonzero(np.ones(3))"),
    ("PK106", "ids = torch.where(self.m)", "y = torch.where(self.m[:, None], self.x, 0.0)"),
    ("PK106", "v = torch.masked_select(self.x, self.m[:, None])", "self.x.masked_fill_(self.m[:, None], 0.0)"),
    ("PK106", "u = torch.unique(self.count)", "u = torch.bincount(self.count, minlength=8)"),
    ("PK106", "r = self.x.repeat_interleave(self.count, dim=0)",
     "r = self.x.repeat_interleave(self.count, dim=0, output_size=64)"),
    ("PK106", "r = self.x.repeat_interleave(self.count, dim=0)", "r = self.x.repeat_interleave(3, dim=0)"),
    ("PK107", "v = self.x[self.m]", "self.x[self.m] = 0.0"),
    ("PK107", "v = self.x[self.x[:, 0] > 0]", "v = self.x[self.idx]"),
    ("PK107", "self.x[self.m] += 1.0", "self.x[self.idx] += 1.0"),
    ("PK108", "v = self.x[[0, 2]]", "v = self.x[:, 0:2]"),
    ("PK108", "v = self.x[:, [0, 2]]", "v = self.x[:, self.idx]"),
    ("PK109", "g = torch.tensor([1.0, 2.0], device='cuda')", "g = torch.tensor([1.0, 2.0])"),
    ("PK109", "g = torch.from_numpy(np.ones(3)).to('cuda')", "g = self.x.to('cuda')"),
    ("PK109", "g = torch.from_numpy(np.ones(3)).cuda()", "g = torch.from_numpy(np.ones(3)).cuda(non_blocking=True)"),
    ("PK110", "torch.cuda.synchronize()", "torch.cuda.current_stream().wait_stream(torch.cuda.Stream())"),
    ("PK110", "ev = torch.cuda.Event()\nev.synchronize()", "ev = torch.cuda.Event()\nev.record()"),
    ("PK110", "torch.cuda.empty_cache()", "torch.cuda.memory_allocated()"),
    ("PK111", "wp.synchronize()", "wp.launch(k, dim=4, inputs=[self.arr], stream=wp.stream_from_torch())"),
    ("PK111", "wp.synchronize_device()", "wp.copy(self.arr, self.arr)"),
    ("PK112", "h = self.arr.numpy()", "h = wp.to_torch(self.arr)"),
    ("PK201", "z = torch.zeros(self.num_envs, 3, device='cuda')", "self.x.zero_()"),
    ("PK201", "r = torch.randn(4, 3, device='cuda')", "torch.randn(4, 3, out=self.x)"),
    ("PK201", "z = self.x.new_zeros(3)", "z = self.x.new_zeros if False else self.x"),
    ("PK202", "c = self.x.clone()", "self.x.copy_(a)"),
    ("PK202", "c = torch.zeros_like(self.x)", "c = self.x.view(-1)"),
    ("PK203", "self.x = self.x + 1.0", "self.x += 1.0"),
    ("PK203", "self.x = torch.clamp(self.x, -1.0, 1.0)", "torch.clamp(self.x, -1.0, 1.0, out=self.x)"),
    ("PK203", "self.x = self.x.mul(2.0)", "self.x.mul_(2.0)"),
    ("PK113", "self.count[a.long()] = 0", "self.count.index_fill_(0, a.long(), 0)"),
    ("PK113", "self.x[3] = 0.0", "self.x[:, 0] = 0.0"),
    ("PK113", "self.x[self.m] = a", "self.x[self.m] = 0.0"),
    ("PK113", "self.x[self.idx, 1] = -1.0", "self.x[self.idx] = a"),
    ("PK204", "buf = wp.zeros(self.num_envs, dtype=float)", "self.arr.zero_()"),
    ("PK204", "buf = wp.clone(self.arr)", "wp.copy(self.arr, self.arr)"),
    ("PK301", "for i in range(self.num_envs):\n    self.x[i].clamp_(-1.0, 1.0)",
     "for i in range(self.num_envs):\n    self.envs[i] = None"),
    ("PK301", "for i in range(len(self.envs)):\n    self.x[i] = a[i]",
     "for i in range(0, self.num_envs, 512):\n    self.x[i:i + 512].zero_()"),
    ("PK301", "ys = [self.x[i].sum() for i in range(self.x.shape[0])]", "ys = [i for i in range(self.x.shape[0])]"),
    ("PK302", "for e in self.envs:\n    self.x[e].zero_()", "for e in self.envs:\n    e.reset()"),
    ("PK302", "for i, e in enumerate(self.envs):\n    self.count[i] += 1",
     "for name, fn in self.terms.items():\n    pass"),
    ("PK303", "for row in self.x:\n    row.clamp_(-1.0, 1.0)", "for d in self.x.shape:\n    pass"),
]


@pytest.mark.parametrize("rule,bad,good", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_positive_and_negative(rule, bad, good):
    assert rule in rules_of(in_step(bad)), f"{rule} not reported for:\n{bad}"
    assert rule not in rules_of(in_step(good)), f"{rule} reported for good code:\n{good}"
    # and the good variant is completely quiet
    assert rules_of(in_step(good)) == [], rules_of(in_step(good))


def test_every_rule_has_a_case():
    covered = {c[0] for c in CASES} | {"PK401", "PK402", "PK501"}
    assert {r.id for r in all_rules()} <= covered


def test_every_message_formats_and_says_the_fix():
    fields = dict(what="X", fix="use the mask", attr="buf", clock="perf_counter", end="end")
    for r in all_rules():
        msg = r.message.format(**fields)
        assert "{" not in msg and len(msg) > 40
        # every message names a remedy after the diagnosis
        assert any(w in msg for w in ("use ", "keep ", "call ", "pass ", "build ", "preallocate", "copy into",
                                      "replace ", "update the", "remove ", "log ", "order ", "share ")), r.id
        assert r.rationale and r.fix and r.summary


# -- not hot: quiet ------------------------------------------------------------------------------

def test_item_outside_hot_path_is_not_reported_but_is_with_all():
    src = """
    import torch
    def summarize(t: torch.Tensor):
        return t.mean().item()
    """
    assert rules_of(src) == []
    assert rules_of(src, all_functions=True) == ["PK101"]


def test_allocation_in_init_is_never_reported():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            self.buf = torch.zeros(n, device="cuda")
            self.copy = self.buf.clone()
    """
    assert rules_of(src, all_functions=True) == []


# -- hot paths -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["step", "reset", "reset_idx", "compute_observations", "_reward_height",
                                  "_get_observations", "_pre_physics_step", "_apply_action", "act", "update",
                                  "forward"])
def test_hot_names(name):
    src = f"""
    import torch
    class Env:
        def {name}(self, t: torch.Tensor):
            return t.item()
    """
    assert rules_of(src) == ["PK101"]


def test_cold_name_is_quiet():
    assert rules_of("""
    import torch
    def helper(t: torch.Tensor):
        return t.item()
    """) == []


def test_callees_in_the_same_module_are_hot_transitively():
    src = """
    import torch
    def leaf(t: torch.Tensor):
        return t.item()
    def middle(t):
        return leaf(t)
    class Env:
        def step(self, t):
            return self._inner(t)
        def _inner(self, t):
            return middle(t)
    """
    assert findings(src) == [(4, "PK101")]


def test_marked_hot_by_decorator_comment_and_config():
    src = """
    import torch
    import perfkit
    from perfkit import hot as pk_hot

    @perfkit.hot
    def a(t: torch.Tensor):
        return t.item()

    @pk_hot
    def b(t: torch.Tensor):
        return t.item()

    # perfkit: hot
    def c(t: torch.Tensor):
        return t.item()

    def d(t: torch.Tensor):  # perfkit: hot
        return t.item()

    def e(t: torch.Tensor):
        return t.item()

    class R:
        def collect(self, t: torch.Tensor):
            return t.item()
    """
    assert [ln for ln, _ in findings(src)] == [8, 12, 16, 19]
    assert [ln for ln, _ in findings(src, hot=("e", "R.collect"))] == [8, 12, 16, 19, 22, 26]
    assert [ln for ln, _ in findings(src, hot=("col*",))] == [8, 12, 16, 19, 26]


def test_rollout_loop_body_is_hot_and_its_callees_too():
    src = """
    import torch
    def log_stats(r: torch.Tensor):
        print(r.mean().item())
    def main(env, policy, opt):
        obs = env.reset()
        x = obs.sum().item()          # before the loop: cold
        for it in range(100):
            act = policy(obs)
            obs, rew, done, info = env.step(act)
            if done.any():
                pass
            log_stats(rew)
        for epoch in range(10):
            opt.step()                # an optimizer step is not an env step
            y = obs.sum().item()
    """
    assert findings(src) == [(4, "PK101"), (11, "PK103")]


def test_module_function_named_step_does_not_make_a_hot_loop():
    src = """
    import mujoco_warp as mjw
    import torch
    for i in range(10):
        mjw.step(m, d)
        v = torch.zeros(3).sum().item()
    """
    assert rules_of(src) == []


def test_warp_kernels_are_device_code_and_skipped():
    src = """
    import warp as wp
    @wp.kernel
    def step(a: wp.array(dtype=float)):
        i = wp.tid()
        if a[i] > 0.0:
            a[i] = 0.0
    """
    assert rules_of(src, all_functions=True) == []


# -- inference: tensors, not Python numbers ---------------------------------------------------------

def test_python_numbers_are_not_tensors():
    src = """
    import torch
    class Env:
        def step(self, n: int, scale: float):
            total = n * 2
            if total > 3:
                print(total, scale)
            k = float(scale)
            for i in range(n):
                pass
            return int(total)
    """
    assert rules_of(src) == []


def test_tensor_flow_through_names_methods_operators_and_returns():
    src = """
    import torch
    import torch.nn.functional as F
    def make(n):
        return torch.ones(n, device="cuda")
    class Env:
        def __init__(self):
            self.w = make(3)
        def step(self, x):
            a = F.relu(self.w)           # torch.nn.functional -> tensor
            b = (a * 2).sum(dim=0)       # operators, methods
            c = make(4)                  # same-module return
            d = b.clone                  # a bound method, not a tensor
            if b: pass
            if c.any(): pass
            if a[0] > 1: pass
    """
    got = findings(src)
    assert (14, "PK103") in got and (15, "PK103") in got and (16, "PK103") in got


def test_numpy_and_cpu_tensors_do_not_sync():
    src = """
    import numpy as np
    import torch
    class Env:
        def step(self, a: torch.Tensor):
            h = a.cpu()              # the one sync
            n = h.numpy()            # already on the host
            v = h.sum().item()
            arr = np.zeros(3)
            w = arr.sum().item()
            t = torch.from_numpy(arr)
            u = t.tolist()
    """
    assert findings(src) == [(6, "PK102")]


def test_env_step_outputs_are_tensors():
    src = """
    import torch
    def rollout(env, policy, n):
        obs = env.reset()
        for _ in range(n):
            obs, rew, done, info = env.step(policy(obs))
            if done.any():
                obs = env.reset()
            x = rew[done]
            print(info)
    """
    assert findings(src) == [(7, "PK103"), (9, "PK107")]


def test_inplace_and_out_are_not_allocations_and_where3_is_not_a_sync():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            self.x = torch.zeros(n, device="cuda")
            self.m = torch.zeros(n, dtype=torch.bool, device="cuda")
        def step(self, a: torch.Tensor):
            self.x.add_(a)
            self.x += a
            torch.mul(self.x, 2.0, out=self.x)
            torch.where(self.m, a, self.x, out=self.x)
            y = torch.where(self.m, a, self.x)
            self.x.masked_fill_(self.m, 0.0)
            self.x[self.m] = 0.0
            self.x.copy_(y)
    """
    assert rules_of(src) == []


def test_lazy_initialisation_is_not_a_per_step_allocation():
    src = """
    import torch
    class Opt:
        def step(self, p: torch.Tensor):
            if self.buf is None:
                self.buf = torch.zeros_like(p)
            state = self.state[p]
            if len(state) == 0:
                state["m"] = torch.zeros(3, device="cuda")
            if "v" not in state:
                state["v"] = p.clone()
            if self.flag:
                tmp = torch.zeros(3, device="cuda")
    """
    assert findings(src) == [(13, "PK201")]


def test_parameters_are_typed_from_what_hot_callers_pass():
    src = """
    import torch
    class Env:
        def __init__(self, n):
            self.base_pos = torch.zeros(n, 3, device="cuda")
        def compute_reward(self):
            return self._height_term(self.base_pos, 0.5) + height_penalty(z=self.base_pos[:, 2])
        def _height_term(self, pos, target):
            if target > 0.3:               # a float: quiet
                pass
            return (pos[:, 2] - target).abs().sum().item()
    def height_penalty(z):
        return float(z.mean())
    """
    assert findings(src) == [(11, "PK101"), (13, "PK104")]
