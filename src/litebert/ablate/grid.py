"""The ablation grid: studies, their cells (model/data overrides on a base config) and the paper's numbers.

A *study* is one of the experiments of ALBERT's paper (Lan et al. 2019, arXiv:1909.11942v6) in miniature; a *cell*
is one pretraining run of it. Every cell is the base model config with a few :class:`~litebert.config.AlbertConfig`
fields changed (``model``) and, for the inter-sentence and data studies, different training data (``data``).

Paper numbers (:data:`PAPER`) are copied from arXiv:1909.11942v6: Table 3 (embedding size, ALBERT-base), Table 4
(sharing, ALBERT-base E=128), Table 5 (inter-sentence loss, ALBERT-base: intrinsic MLM/NSP/SOP accuracies),
Table 7 (additional data, ALBERT-base), Table 8 (dropout, ALBERT-xxlarge), Table 11 (depth, ALBERT-large),
Table 12 (width, 3-layer ALBERT-large). "avg" is the paper's downstream average (SQuAD1.1/2.0, MNLI, SST-2, RACE);
parameters are in millions, as printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litebert.errors import LitebertError

STUDIES = ("embedding-size", "sharing", "inter-sentence", "depth", "width", "dropout", "data", "system")

#: the default base model: scripts/quickstart_model.json (E64 H128, 4 layers sharing one group, 4 heads).
DEFAULT_BASE: dict[str, Any] = {
    "vocab_size": 8000,
    "embedding_size": 64,
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_hidden_groups": 1,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "classifier_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.05,
}

#: the paper's rows, by study then by cell name of ours (see the module docstring for the tables).
PAPER: dict[str, dict[str, dict[str, Any]]] = {
    "embedding-size": {  # Table 3, ALBERT-base (H 768, L 12); E in {64, 128, 256, 768}
        "E64-not-shared": {"E": 64, "params_m": 87, "avg": 81.3},
        "E128-not-shared": {"E": 128, "params_m": 89, "avg": 81.7},
        "E256-not-shared": {"E": 256, "params_m": 93, "avg": 81.8},
        "E768-not-shared": {"E": 768, "params_m": 108, "avg": 82.3},
        "E64-all-shared": {"E": 64, "params_m": 10, "avg": 79.0},
        "E128-all-shared": {"E": 128, "params_m": 12, "avg": 80.1},
        "E256-all-shared": {"E": 256, "params_m": 16, "avg": 79.6},
        "E768-all-shared": {"E": 768, "params_m": 31, "avg": 79.8},
    },
    "sharing": {  # Table 4, ALBERT-base E=128
        "all-shared": {"params_m": 12, "avg": 80.1},
        "shared-attention": {"params_m": 64, "avg": 81.7},
        "shared-FFN": {"params_m": 38, "avg": 80.2},
        "not-shared": {"params_m": 89, "avg": 81.6},
    },
    "inter-sentence": {  # Table 5, ALBERT-base: intrinsic accuracies (%) on the paper's dev set, and downstream avg
        "none": {"mlm": 54.9, "nsp": 52.4, "sop": 53.3, "avg": 79.0},
        "nsp": {"mlm": 54.5, "nsp": 90.5, "sop": 52.0, "avg": 79.2},
        "sop": {"mlm": 54.0, "nsp": 78.9, "sop": 86.5, "avg": 80.1},
    },
    "depth": {  # Table 11, ALBERT-large (H 1024, 18M parameters at every depth)
        "L1": {"params_m": 18, "avg": 52.9},
        "L3": {"params_m": 18, "avg": 71.2},
        "L6": {"params_m": 18, "avg": 77.2},
        "L12": {"params_m": 18, "avg": 81.5},
        "L24": {"params_m": 18, "avg": 82.1},
        "L48": {"params_m": 18, "avg": 81.8},
    },
    "width": {  # Table 12, 3-layer ALBERT-large
        "H1024": {"params_m": 18, "avg": 71.2},
        "H2048": {"params_m": 60, "avg": 74.6},
        "H4096": {"params_m": 225, "avg": 76.3},
        "H6144": {"params_m": 499, "avg": 74.0},
    },
    "dropout": {  # Table 8, ALBERT-xxlarge at about 1M steps
        "dropout-0.1": {"avg": 90.4},
        "dropout-0": {"avg": 90.7},
    },
    "data": {  # Table 7, ALBERT-base: Wikipedia + BookCorpus, then with XLNet's/RoBERTa's additional data
        "all": {"avg": 80.1, "note": "no additional data"},
        "more": {"avg": 80.8, "note": "with additional data"},
    },
}


@dataclass(frozen=True)
class Cell:
    """One pretraining run of a study.

    Attributes:
        study: the study name (one of :data:`STUDIES`).
        name: the cell name, used as its directory ``DIR/<study>/<name>``.
        model: AlbertConfig field overrides on the base config.
        inter_sentence_task: the training data's sentence task ("sop", "nsp" or "none").
        data_fraction: fraction of the training corpus's lines used (the data study), 1.0 = all.
        system: "litebert" (``litebert pretrain``) or "transformers" (``transformers.Trainer``, MLM only).
        paper_key: the row of :data:`PAPER` this cell stands beside, or None.
    """

    study: str
    name: str
    model: dict = field(default_factory=dict)
    inter_sentence_task: str = "sop"
    data_fraction: float = 1.0
    system: str = "litebert"
    paper_key: str | None = None

    def config(self, base):
        """The cell's :class:`~litebert.config.AlbertConfig`: ``base`` with :attr:`model` applied (validated)."""
        return base.replace(**self.model)


def _heads_for(hidden: int, head_size: int) -> int:
    return max(1, hidden // head_size) if hidden % head_size == 0 else 1


def check_base(base, source: str = "the base config") -> None:
    """Refuse a base config whose cells would not be what their names say.

    The cells are defined for ``inner_group_num`` 1, the paper's ALBERT: with n > 1 every layer group runs n distinct
    layers per layer, so "L1" would be n layers deep, "all-shared" n distinct layers and "not-shared" n·L, and the
    parameter closed form of docs/ablations.md would not hold. Raises :class:`LitebertError` naming ``source`` (e.g.
    ``"--base-config FILE"``).
    """
    if base.inner_group_num != 1:
        raise LitebertError(
            f"{source}: inner_group_num {base.inner_group_num}, expected 1: the ablation cells (depth 1, 2, 4, 8 "
            f"layers; all-shared one layer, not-shared L layers) are defined for the paper's ALBERT, whose layer "
            f"groups hold one layer each; set inner_group_num to 1"
        )


def build_grid(study: str, base) -> list[Cell]:
    """The cells of ``study`` for the base config ``base`` (an AlbertConfig).

    Raises :class:`LitebertError` for an unknown study (listing the known ones) or a base config the cells are not
    defined for (:func:`check_base`).
    """
    if study not in STUDIES:
        raise LitebertError(f"unknown study {study!r}; known studies: {', '.join(STUDIES)}")
    check_base(base)
    H, L = base.hidden_size, base.num_hidden_layers
    all_shared = {"sharing": "all", "num_hidden_groups": 1}
    not_shared = {"sharing": "none", "num_hidden_groups": L}
    cells: list[Cell] = []
    if study == "embedding-size":
        # Table 3: E from H/8 up to H, under both sharing regimes
        sizes = sorted({e for e in (H // 8, H // 4, H // 2, H) if e >= 4})
        for shared, over in (("not-shared", not_shared), ("all-shared", all_shared)):
            for e in sizes:
                cells.append(Cell(study, f"E{e}-{shared}", {"embedding_size": e, **over}))
    elif study == "sharing":
        # Table 4: "attention"/"ffn" share that block along the groups (one group: across all layers)
        cells = [
            Cell(study, "all-shared", dict(all_shared)),
            Cell(study, "shared-attention", {"sharing": "attention", "num_hidden_groups": 1}),
            Cell(study, "shared-FFN", {"sharing": "ffn", "num_hidden_groups": 1}),
            Cell(study, "not-shared", dict(not_shared)),
        ]
    elif study == "inter-sentence":
        # + "sop-official": SOP data as google-research/albert makes it (a one-sentence chunk gets B from another
        # document, labelled 1 like a swap), the data the paper's SOP row was trained on; litebert's "sop" never
        # leaks other-document pairs into SOP (see litebert.data.instances)
        cells = [Cell(study, task, {}, inter_sentence_task=task) for task in ("none", "nsp", "sop", "sop-official")]
    elif study == "depth":
        # Table 11: all-shared, so the parameter count does not depend on the depth
        cells = [Cell(study, f"L{n}", {"num_hidden_layers": n, **all_shared}) for n in (1, 2, 4, 8)]
    elif study == "width":
        # Table 12: a 3-layer all-shared model; the head size and the FFN ratio of the base are kept
        head = base.head_size
        ratio = base.intermediate_size / H
        for h in sorted({H // 2, H, 2 * H}):
            cells.append(
                Cell(
                    study,
                    f"H{h}",
                    {
                        "hidden_size": h,
                        "num_attention_heads": _heads_for(h, head),
                        "intermediate_size": max(1, round(ratio * h)),
                        "num_hidden_layers": 3,
                        **all_shared,
                    },
                )
            )
    elif study == "dropout":
        # Table 8: 0.1 (BERT) against 0 (ALBERT's final choice), on embeddings, residual branches and attention
        cells = [
            Cell(study, "dropout-0.1", {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}),
            Cell(study, "dropout-0", {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}),
        ]
    elif study == "data":
        cells = [Cell(study, name, {}, data_fraction=f) for name, f in (("quarter", 0.25), ("half", 0.5), ("all", 1.0))]
    elif study == "system":
        # transformers' ALBERT cannot share only attention/FFN: the base must be "all" or "none" sharing
        cells = [
            Cell(study, "litebert", {}),
            Cell(study, "transformers", {}, inter_sentence_task="none", system="transformers"),
        ]
    return [
        Cell(
            c.study,
            c.name,
            c.model,
            c.inter_sentence_task,
            c.data_fraction,
            c.system,
            _paper_key(study, c, cells, base),
        )
        for c in cells
    ]


def _paper_key(study: str, cell: Cell, cells: list[Cell], base) -> str | None:
    """The :data:`PAPER` row that stands beside ``cell``: the same shape relative to the base, not the same number.

    embedding-size: the same rank of E within its sharing regime (ours H/8, H/4, H/2, H ↔ the paper's 64, 128, 256,
    768 of H 768); depth: the same rank (1, 2, 4, 8 ↔ 1, 3, 6, 12); width: the same multiple of the base width
    (H ↔ the paper's 1024, 2H ↔ 2048; H/2 has no row); the other studies: the row of the same name.
    """
    paper = PAPER.get(study, {})
    if study == "embedding-size":
        regime = cell.name.split("-", 1)[1]
        ours = sorted(c.model["embedding_size"] for c in cells if c.name.endswith(regime))
        theirs = sorted((v["E"], k) for k, v in paper.items() if k.endswith(regime))
        rank = ours.index(cell.model["embedding_size"])
        return theirs[rank][1] if rank < len(theirs) else None
    if study == "depth":
        ours = sorted(c.model["num_hidden_layers"] for c in cells)
        theirs = sorted(paper, key=lambda k: int(k[1:]))
        rank = ours.index(cell.model["num_hidden_layers"])
        return theirs[rank] if rank < len(theirs) else None
    if study == "width":
        h = cell.model["hidden_size"]
        key = f"H{1024 * h // base.hidden_size}" if (1024 * h) % base.hidden_size == 0 else None
        return key if key in paper else None
    return cell.name if cell.name in paper else None


def select_cells(cells: list[Cell], names: list[str] | None) -> list[Cell]:
    """The cells named in ``names`` (all when None), in grid order; LitebertError for a name not in the grid."""
    if not names:
        return cells
    known = {c.name for c in cells}
    unknown = [n for n in names if n not in known]
    if unknown:
        study = cells[0].study if cells else "?"
        raise LitebertError(
            f"unknown cell(s) {', '.join(map(repr, unknown))} for study {study!r}; its cells: "
            f"{', '.join(c.name for c in cells)}"
        )
    return [c for c in cells if c.name in names]
