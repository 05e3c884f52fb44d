"""``litebert ablate``: the ALBERT paper's ablations in miniature (issue 15). See :mod:`litebert.ablate.run`."""

from __future__ import annotations

from litebert.ablate.grid import DEFAULT_BASE, PAPER, STUDIES, Cell, build_grid, select_cells
from litebert.ablate.run import RESULT_FIELDS, AblateConfig, AblateResult, ablate, evaluate_model, wilson_interval

__all__ = [
    "DEFAULT_BASE",
    "PAPER",
    "RESULT_FIELDS",
    "STUDIES",
    "AblateConfig",
    "AblateResult",
    "Cell",
    "ablate",
    "build_grid",
    "evaluate_model",
    "select_cells",
    "wilson_interval",
]
