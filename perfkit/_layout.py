"""``perfkit.probes`` from a source checkout.

The probes sit at the top of the repository (``probes/``, beside ``perfkit/``); the wheel installs
them inside the package as ``perfkit.probes`` (setuptools' ``package-dir`` mapping in
``pyproject.toml``). When perfkit runs from a checkout (``PYTHONPATH``, an editable install, the GPU
machine's copy of the tree) there is no ``perfkit/probes``: the finder installed here resolves
``perfkit.probes`` to the checkout's ``probes/`` — of the same checkout as this ``perfkit``, ahead of
any other installed copy. Its submodules are then found through the package's own ``__path__``.
"""

from __future__ import annotations

import importlib.util
import os
import sys

NAME = "perfkit.probes"


class ProbesFinder:
    """Resolves only ``perfkit.probes``, to one directory."""

    def __init__(self, directory: str):
        self.directory = directory

    def find_spec(self, fullname, path=None, target=None):
        if fullname != NAME:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(self.directory, "__init__.py"), submodule_search_locations=[self.directory])


def install_probes_finder() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "probes")):
        return  # an installed wheel: perfkit/probes is a real subpackage
    top = os.path.join(os.path.dirname(here), "probes")
    if not os.path.isfile(os.path.join(top, "__init__.py")):
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ProbesFinder)]
    sys.meta_path.insert(0, ProbesFinder(top))
