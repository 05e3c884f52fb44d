"""``--config``'s help names an example key that the command's own settings file takes (``ablate`` has ``steps``,
not ``pretrain``'s ``max_steps``, which it rejected)."""

from __future__ import annotations

import argparse
import json
import re

from litebert.cli import build_parser
from litebert.settings import read_settings_file


def _config_commands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand that has ``--config FILE`` of settings (not convert-tf's ``--config``, a model config), by name."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if any(a.dest == "_config_file" for a in p._actions)}


def test_every_config_help_example_is_a_key_the_command_reads(tmp_path):
    commands = _config_commands()
    assert {"ablate", "pretrain", "prepare", "train-tokenizer", "finetune", "evaluate", "predict"} <= set(commands)
    examples = {}
    for name, p in commands.items():
        help_text = next(a.help for a in p._actions if a.dest == "_config_file")
        found = re.search(r"e\.g\. (\w+)", help_text)
        assert found, (name, help_text)
        examples[name] = found.group(1)
        defaults = p.parse_args([])  # no options given: the namespace holds the command's settings class
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({examples[name]: 1}))
        # the settings-file reader accepts the key (an unknown one is "unknown setting 'max_steps' ...")
        assert read_settings_file(path, defaults._settings_class) == {examples[name]: 1}
    assert examples["ablate"] == "steps"  # the report's case: `max_steps = 30` in ablate's --config was refused


def test_config_help_names_run_settings_json_only_where_the_command_writes_one():
    """prepare's and train-tokenizer's help said "a run's run_settings.json works too"; neither writes one."""
    writers = set()
    for name, p in _config_commands().items():
        if "run_settings.json works too" in next(a.help for a in p._actions if a.dest == "_config_file"):
            writers.add(name)
    assert writers == {"pretrain", "finetune", "evaluate", "predict", "ablate"}
