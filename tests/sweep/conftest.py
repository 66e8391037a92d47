import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def toy_on_path(monkeypatch):
    """Make ``sweep_toy_env`` importable here and in the sweep's point subprocesses."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    yield
    sys.modules.pop("sweep_toy_env", None)
