import pytest


@pytest.fixture(scope="session")
def stacks_workdir(tmp_path_factory):
    """The working directory of every stack run (records land here too)."""
    return tmp_path_factory.mktemp("stacks")
