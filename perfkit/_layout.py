"""``perfkit.probes`` from a source checkout, with nothing added to the host's import system.

The probes sit at the top of the repository (``probes/``, beside ``perfkit/``); the wheel installs
them inside the package as ``perfkit.probes`` (setuptools' ``package-dir`` mapping in
``pyproject.toml``). When perfkit runs from a checkout (``PYTHONPATH``, an editable install, the GPU
machine's copy of the tree) there is no ``perfkit/probes``: ``import perfkit`` then loads the
checkout's ``probes/__init__.py`` (a few stdlib imports) as ``perfkit.probes`` once, so its submodules
are found through that package's own ``__path__`` by the ordinary path finder. No finder is put on
``sys.meta_path``: a profiler must not change how the program it watches imports.
"""

from __future__ import annotations

import importlib.util
import os
import sys

NAME = "perfkit.probes"


def load_checkout_probes(package: object) -> None:
    """Load ``probes/`` of the same checkout as ``package`` (``perfkit``) as ``perfkit.probes``."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "probes")) or NAME in sys.modules:
        return  # an installed wheel (perfkit/probes is a real subpackage), or loaded already
    top = os.path.join(os.path.dirname(here), "probes")
    init = os.path.join(top, "__init__.py")
    if not os.path.isfile(init):
        return
    spec = importlib.util.spec_from_file_location(NAME, init, submodule_search_locations=[top])
    if spec is None or spec.loader is None:  # pragma: no cover - a file that exists always gives a spec
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    setattr(package, "probes", module)
