"""Fuzzing, bounded to a few seconds: thousands of generated and mutated sources, zero crashes.

Hypothesis draws the seeds (a failure reports the seed to replay); a small grammar turns each seed
into several programs, so thousands of sources are linted in seconds.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.lint import Options
from perfkit.lint.engine import lint_text_safely

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))
SOURCES = [p.read_text() for p in CORPUS]
GENERATED_PER_EXAMPLE = 6
MUTATED_PER_EXAMPLE = 10
BOUNDED = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))
LINTED = {"generated": 0, "mutated": 0}

NAMES = ["t", "self.x", "obs", "done", "env", "self.envs", "mask", "a", "wp", "np", "torch", "self.num_envs", "rew",
         "env_ids", "self", "info", "x[0]", "self.d.qpos", "F", "cap"]
CALLS = ["item()", "cpu()", "numpy()", "tolist()", "nonzero()", "any()", "clone()", "sum()", "to('cpu')", "cuda()",
         "step(a)", "synchronize()", "repeat_interleave(t)", "unique()", "masked_select(m)", "add_(1)", "new_zeros(3)",
         "elapsed_time(e)", "record()", "query()", "shape[0]", "size(0)", "list()", "items()"]
FUNCS = ["torch.zeros", "torch.where", "torch.tensor", "wp.launch", "wp.synchronize", "float", "int", "bool", "print",
         "len", "range", "time.time", "time.perf_counter", "np.asarray", "wp.to_torch", "mjw.step", "torch.cat",
         "enumerate", "zip", "wp.capture_launch", "torch.cuda.synchronize", "torch.nonzero", "math.sqrt", "self.step",
         "F.relu", "torch.from_numpy", "wp.array", "mjw.make_data", "str", "self._reward_x", "compute_obs"]
OPS = ["+", "*", ">", "&", "|", "@", "%", "==", "and", "or", "is", "-", "<", "in"]
HEADS = ["if {e}:", "while {e}:", "for i in {e}:", "with {e} as cap:", "for i in range(self.num_envs):", "try:",
         "def step(self, a):", "def compute_obs(t: torch.Tensor):", "class E:", "@wp.kernel\ndef k(a):",
         "async def act(self, obs):", "for i, e in enumerate({e}):", "elif {e}:", "else:", "# perfkit: hot\ndef h(t):",
         "@perfkit.hot\ndef g(x):", "lambda_ = lambda q: {e}", "match {e}:\n    case 1:"]
HEADER = ("import time\nimport math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
          "import warp as wp\nimport mujoco_warp as mjw\nimport perfkit\n")


def expr(r: random.Random, depth: int = 0) -> str:
    k = r.randrange(8 if depth < 3 else 2)
    if k == 0:
        return r.choice(NAMES)
    if k == 1:
        return r.choice(["1", "0.5", "'s'", "[0, 1]", "None", "True", "(1, 2)", "{}", "..."])
    if k == 2:
        return f"{expr(r, depth + 1)}.{r.choice(CALLS)}"
    if k == 3:
        args = ", ".join(expr(r, depth + 1) for _ in range(r.randrange(4)))
        kw = r.choice(["", ", out=self.x", ", device='cuda'", ", stream=s", ", output_size=3", ", dtype=torch.bool"])
        return f"{r.choice(FUNCS)}({args}{kw if args else ''})"
    if k == 4:
        return f"({expr(r, depth + 1)} {r.choice(OPS)} {expr(r, depth + 1)})"
    if k == 5:
        return f"{expr(r, depth + 1)}[{r.choice([expr(r, depth + 1), '[0, 2]', ':, 0', '...', 'mask'])}]"
    if k == 6:
        return f"f'{{{expr(r, depth + 1)}}}'"
    return r.choice([f"(not {expr(r, depth + 1)})", f"[v for v in {expr(r, depth + 1)} if v]",
                     f"({expr(r, depth + 1)} if {expr(r, depth + 1)} else 0)"])


def block(r: random.Random, depth: int = 0) -> list:
    out = []
    for _ in range(r.randrange(1, 5)):
        k = r.randrange(10 if depth < 3 else 4)
        target = r.choice(["y", "self.x", "obs, rew, done, info", "self.buf", "x[mask]", "t0", "t1", "self.y[0]"])
        if k == 0:
            out.append(f"{target} = {expr(r)}")
        elif k == 1:
            out.append(expr(r))
        elif k == 2:
            out.append(f"{target} {r.choice(['+=', '*=', '|='])} {expr(r)}")
        elif k == 3:
            out.append(r.choice([f"assert {expr(r)}", f"return {expr(r)}", "pass", "break", f"del {target}"]))
        else:
            head = r.choice(HEADS).format(e=expr(r))
            out += head.split("\n")
            indent = "        " if head.startswith("match") else "    "
            out += [indent + line for line in block(r, depth + 1)]
            if head == "try:":
                out += ["except Exception:", "    pass"]
    return out


def _lint(src: str, i: int):
    opts = Options(all_functions=bool(i % 2), hot=("h*",) if i % 3 == 0 else ())
    found, err = lint_text_safely(src, "fuzz.py", opts)
    assert err is None or (err.message and "internal error" not in err.message), err
    for v in found:
        assert v.line >= 1 and v.col >= 1 and v.rule.startswith("PK") and v.message


@BOUNDED
@given(st.integers(0, 2**32 - 1))
def test_generated_programs_never_crash(seed):
    r = random.Random(seed)
    for i in range(GENERATED_PER_EXAMPLE):
        lines = block(r)
        src = HEADER + "class Env:\n    def step(self, a):\n" + "".join(f"        {ln}\n" for ln in lines)
        src += "".join(f"{ln}\n" for ln in block(r))  # module level too
        _lint(src, i)
        LINTED["generated"] += 1


def _mutate(r: random.Random, src: str) -> str:
    for _ in range(r.randrange(1, 6)):
        i = r.randrange(len(src) + 1)
        op = r.randrange(6)
        if op == 0:
            src = src[:i] + src[i + 1:]
        elif op == 1:
            src = src[:i] + r.choice([":", "(", ")", "[", "'", '"', "\\", "    ", "\t", "\n", "\x00", "é", "def ",
                                      "if t:", " not ", ".item()", "#"]) + src[i:]
        elif op == 2:
            src = src[:i] + src[i:][:60] + src[i:]
        elif op == 3:
            j = r.randrange(len(src) + 1)
            src = src[:min(i, j)] + src[max(i, j):]
        elif op == 4:
            lines = src.split("\n")
            r.shuffle(lines[r.randrange(len(lines)):])
            src = "\n".join(lines)
        else:
            src = src[:i]
    return src


@BOUNDED
@given(st.integers(0, 2**32 - 1))
def test_mutated_corpus_never_crashes(seed):
    r = random.Random(seed)
    for i in range(MUTATED_PER_EXAMPLE):
        src = r.choice(SOURCES)
        lines = src.split("\n")
        a = r.randrange(len(lines))
        window = "\n".join(lines[a:a + r.randrange(10, 60)])  # a slice keeps it fast; the header gives context
        _lint(HEADER + _mutate(r, window), i)
        LINTED["mutated"] += 1


def test_fuzz_volume():
    # runs after the two above in file order: thousands of sources went through the linter
    if LINTED["generated"] and LINTED["mutated"]:
        assert LINTED["generated"] + LINTED["mutated"] >= 3000
