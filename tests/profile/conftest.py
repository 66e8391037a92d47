import pytest


@pytest.fixture(scope="session", autouse=True)
def _torch_lazy_imports_done():
    """torch imports ~800 modules (dynamo) on the first optimizer step; do it once, outside any session,
    so that no test pays for it under the discovery window."""
    import torch

    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    p.sum().backward()
    opt.step()
    opt.zero_grad()
