"""The command line itself: help texts show defaults, abbreviations and bad integers are usage errors."""

from __future__ import annotations

import pytest

from litebert.cli import build_parser, main


@pytest.mark.parametrize(
    "command, option, default",
    [
        ("prepare", "--max-seq-length", "128"),
        ("prepare", "--masked-lm-prob", "0.15"),
        ("pretrain", "--max-steps", "1000"),
        ("pretrain", "--optimizer", "lamb"),
        ("finetune", "--learning-rate", "2e-05"),
        ("finetune", "--epochs", "3.0"),
    ],
)
def test_help_shows_every_default(command, option, default):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    text = " ".join(sub.format_help().split())  # argparse wraps lines
    after = text.split(option, 2)[-1]  # the option's help entry follows its second mention (the first is usage)
    assert f"default: {default}" in after.split(" --")[0], (command, option)


def test_abbreviated_option_and_bad_integer_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["pretrain", "--data", "d", "--model-config", "albert-debug", "--output", "o", "--max-step", "5"])
    assert exc.value.code == 2 and "--max-step" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["pretrain", "--data", "d", "--model-config", "albert-debug", "--output", "o", "--max-steps", "x"])
    assert exc.value.code == 2 and "expected an integer, got 'x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, field",
    [
        (["prepare", "--corpus", "c", "--tokenizer", "t", "--output", "o"], "progress"),
        (["pretrain", "--data", "d", "--model-config", "albert-debug", "--output", "o"], "progress_bar"),
        (["finetune", "--model", "m", "--train", "t", "--dev", "d", "--output", "o", "--task", "sst2"], "progress_bar"),
    ],
)
def test_both_spellings_of_no_progress(argv, field):
    from litebert.cli.options import config_from_args

    parser = build_parser()
    assert getattr(config_from_args(parser.parse_args(argv)), field) is True
    for flag in ("--no-progress", "--no-progress-bar"):
        assert getattr(config_from_args(parser.parse_args([*argv, flag])), field) is False


@pytest.mark.parametrize(
    "command, files",
    [
        (
            "finetune",
            ["predictions.tsv", "predictions.txt", "predictions.jsonl", "predictions.json", "nbest_predictions.json"],
        ),
        ("evaluate", ["eval_results.json", "run_settings.json"]),
        ("predict", ["run_settings.json"]),
    ],
)
def test_finetune_help_names_the_files_each_kind_writes(command, files):
    """Defect: `finetune --help` said OUTPUT/predictions.tsv for every task; NER writes predictions.txt (.jsonl) and
    QA predictions.json + nbest_predictions.json."""
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    text = " ".join(sub.format_help().split())
    assert all(name in text for name in files), [name for name in files if name not in text]
    assert "--save-steps" in text if command == "finetune" else "fine-tuned with" in text
