"""Where a tensor lives, as the linter reads it (issue 18: it and the profiler disagreed, undocumented, on
tensors made without a device; issue 20: default devices, buffers, host-side factories).

The decision: the linter reads code as it runs on the GPU machine. A factory without ``device=`` makes a
host tensor there, unless the process sets a default device (``torch.set_default_device("cuda")`` or
Genesis' ``gs.init`` in any linted module): reading a host tensor never syncs, so no finding. A
``register_buffer`` buffer moves with its module's ``.to(device)``: a device tensor. The profiler on a
CPU-only machine cannot tell the two apart and reports such a read as *would sync on GPU*; ``perfkit lint
--profile`` lists it as runtime-only (docs/lint-rules.md, "Where a tensor lives")."""

from __future__ import annotations

from tests.lint.test_lint_real_causes import lint, lint_tree


def test_a_factory_without_device_is_host_data_unless_a_default_device_is_set():
    body = """
    import torch
    {setup}
    class Env:
        def __init__(self, n):
            self.count = torch.zeros(n)
            self.done = torch.zeros(n, dtype=torch.bool)
        def step(self, a):
            if self.done.any():
                pass
            return self.count.sum().item()
    """
    assert lint(body.format(setup="")) == []
    assert lint(body.format(setup='torch.set_default_device("cpu")')) == []
    assert lint(body.format(setup='torch.set_default_device("cuda")')) == [(9, "PK103"), (11, "PK101")]


def test_a_default_device_set_in_another_module_holds_for_the_project(tmp_path):
    files = {
        "env.py": """
            import torch
            class Env:
                def __init__(self, n):
                    self.count = torch.zeros(n)
                def step(self, a):
                    return self.count.sum().item()
        """,
        "main.py": """
            import genesis as gs
            from env import Env
            gs.init(backend=gs.gpu)
        """,
    }
    assert lint_tree(tmp_path, files) == [("env.py", 7, "PK101")]
    files["main.py"] = "import torch\nfrom env import Env\n"
    assert lint_tree(tmp_path, files) == []


def test_a_default_device_holds_only_for_the_modules_of_the_setters_process(tmp_path):
    # a folder of single-file scripts (cleanrl): the one that calls torch.set_default_device runs alone; the others'
    # factories without device= stay on the host
    files = {
        "dqn.py": """
            import torch
            class Env:
                def __init__(self, n):
                    self.count = torch.zeros(n)
                def step(self, a):
                    return self.count.sum().item()
        """,
        "ppo_trxl.py": """
            import torch
            torch.set_default_device("cuda")
        """,
    }
    assert lint_tree(tmp_path, files) == []
    files["ppo_trxl.py"] = "import torch\nfrom dqn import Env\ntorch.set_default_device('cuda')\n"
    assert lint_tree(tmp_path, files) == [("dqn.py", 7, "PK101")]


def test_buffers_registered_without_device_move_with_the_module():
    src = """
    import torch
    class Obs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(3))
        def forward(self, x):
            return float(self.mean.max())
    """
    assert lint(src) == [(8, "PK104")]


def test_torch_cat_of_host_tensors_stays_on_the_host():
    src = """
    import torch
    class Runner:
        def __init__(self):
            a = torch.zeros(3)
            self.hist = torch.cat([a, torch.ones(2)])
        def step(self, x):
            return self.hist.mean().item()
    """
    assert lint(src) == []
