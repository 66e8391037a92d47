import pytest
from report_helpers import NAIVE_FINDINGS, make_run


@pytest.fixture
def train_runs(tmp_path):
    good = make_run("examples/train.py", sps=1.2e6, step_ms=3.4)
    naive = make_run("examples/train_naive.py", sps=0.45e6, step_ms=9.1, findings=NAIVE_FINDINGS, seed=1,
                     physics=1.9, policy=0.6, reward=0.9, learner=0.5, logging=2.1, other=3.1)
    paths = [good.save(tmp_path / "train.json"), naive.save(tmp_path / "train_naive.json")]
    return paths
