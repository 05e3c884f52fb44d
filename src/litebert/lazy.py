"""Package attributes imported on first use (PEP 562), so that a command that needs no torch starts without it.

``litebert prepare``, ``train-tokenizer`` and ``plot`` run no model, yet importing ``torch`` cost each process about
1.2 s on a 2-core CPU (more with the CUDA build). The package ``__init__`` files that re-export torch-backed names
(``litebert``, ``litebert.data``, ``litebert.finetune``, ``litebert.training``) resolve them here, when they are
first read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the ``__init__`` of ``package``.

    ``exports`` maps each public name to the module that defines it (``{"PretrainingDataset":
    "litebert.data.dataset"}``). The module is imported when the name is first read; the value is then kept in the
    package's namespace, so later reads cost nothing.

    Raises ValueError when a name is also the last part of one of the modules (``litebert.training.pretrain`` the
    function and the submodule): once that submodule is imported, Python binds the package attribute to the
    module, and which of the two a reader got would depend on import order. Export such a name eagerly, or not at
    all. The returned ``__getattr__`` raises AttributeError for a name not in ``exports``, as a module does.
    """
    clash = sorted(set(exports) & {module.rsplit(".", 1)[-1] for module in exports.values()})
    if clash:
        raise ValueError(f"{package}: lazy names {clash} are also submodule names")

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
