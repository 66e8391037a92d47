import os

import pytest

os.environ.setdefault("WARP_CACHE_PATH", os.path.join(os.path.expanduser("~"), ".cache", "warp"))


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs CUDA (gpu marker); this machine has none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
