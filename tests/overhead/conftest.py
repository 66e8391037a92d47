import pytest

from _overhead_helpers import Fake
from _overhead_helpers import child_env as _child_env


@pytest.fixture
def child_env():
    return _child_env()


@pytest.fixture
def fake(tmp_path):
    return lambda plan: Fake(tmp_path, plan)
