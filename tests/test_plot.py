"""`litebert plot`: which metrics.jsonl keys go on which panel of curves.png."""

from __future__ import annotations

from litebert.training.plot import panel_keys


def test_counts_and_rates_are_not_drawn_as_accuracies():
    """A pretraining record's `skipped_steps` (a count) was drawn on the accuracy panel; rates, counts and the
    perplexity stay off both panels, losses go left and accuracies / F1 / correlations right."""
    train = {
        "step": 50,
        "split": "train",
        "loss": 9.5,
        "mlm_loss": 8.8,
        "sop_loss": 0.69,
        "mlm_accuracy": 0.03,
        "sop_accuracy": 0.52,
        "grad_norm": 1.6,
        "tokens_per_second": 7635.0,
        "skipped_steps": 0,
        "learning_rate": 1.6e-4,
    }
    dev = {"step": 50, "split": "eval", "loss": 0.6, "f1": 0.71, "pearson": 0.4, "mlm_perplexity": 99.0}
    assert panel_keys([train, dev]) == (
        ["loss", "mlm_loss", "sop_loss"],
        ["f1", "mlm_accuracy", "pearson", "sop_accuracy"],
    )
