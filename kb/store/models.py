"""qdrant-client's request models and HTTP exceptions, without importing qdrant-client's
clients: `import qdrant_client` loads its sync and async clients, gRPC stubs and local mode
(seconds on a laptop, most of a cold `query.py`), while embedded storage on Qdrant's engine
(kb.store.edge) needs only the pydantic models.

The few leaf modules are loaded from qdrant-client's own files under their own names, so a
later `import qdrant_client` (a server, local mode) reuses them: one set of classes, whatever
is imported first. Should qdrant-client's layout change, this falls back to the plain import.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

# in load order: each only imports the ones before it (and pydantic, numpy, httpx)
_LEAVES = (
    ("qdrant_client._pydantic_compat", "_pydantic_compat.py"),
    ("qdrant_client._numpy_vectors", "_numpy_vectors.py"),
    ("qdrant_client.http.models.models", "http/models/models.py"),
    ("qdrant_client.http.exceptions", "http/exceptions.py"),
)


def _load_leaves() -> tuple[ModuleType, ModuleType]:
    if "qdrant_client" in sys.modules:  # already paid for: the regular modules
        from qdrant_client import models
        from qdrant_client.http import exceptions

        return models, exceptions
    spec = importlib.util.find_spec("qdrant_client")  # finds, does not run, the package
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("qdrant_client not found")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, file in _LEAVES:
        if name in sys.modules:
            continue
        leaf = importlib.util.spec_from_file_location(name, root / file)
        if leaf is None or leaf.loader is None:
            raise ImportError(f"{root / file} not found")
        module = importlib.util.module_from_spec(leaf)
        sys.modules[name] = module
        try:
            leaf.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[_LEAVES[2][0]], sys.modules[_LEAVES[3][0]]


@cache
def _loaded() -> tuple[ModuleType, ModuleType]:
    try:
        return _load_leaves()
    except (ImportError, OSError):  # pragma: no cover - another qdrant-client layout
        from qdrant_client import models
        from qdrant_client.http import exceptions

        return models, exceptions


class _OnFirstUse:
    """One of the two modules, loaded when an attribute is first read: the models are
    pydantic classes that take most of a second to build, and a search through the MCP server
    (kb.app.remote) never needs them."""

    def __init__(self, index: int) -> None:
        self._index = index

    def __getattr__(self, name: str) -> Any:
        return getattr(_loaded()[self._index], name)


if TYPE_CHECKING:  # the type checker reads the same classes from their modules
    from qdrant_client.http import exceptions
    from qdrant_client.http.models import models
else:
    models, exceptions = _OnFirstUse(0), _OnFirstUse(1)

__all__ = ["exceptions", "models"]
