"""Settings: every config dataclass and the command derived from it agree (defaults, every field settable from the
command line and from --config, the same bounds, one error format), unknown options and keys are named with the
closest valid one."""

from __future__ import annotations

import dataclasses
import json

import pytest

from litebert import settings as S
from litebert.ablate.run import AblateConfig
from litebert.cli import build_parser, main
from litebert.cli.options import config_from_args
from litebert.data.prepare import PrepareConfig
from litebert.data.tokenizer_config import TrainTokenizerConfig
from litebert.errors import LitebertError
from litebert.finetune.run import DataOptions, EvaluateConfig, FinetuneConfig
from litebert.training.pretrain import PretrainConfig

#: command → (config class, the required settings). Every command whose options derive from a config is listed
#: (test_every_derived_command_is_walked fails when a new one is not).
COMMANDS = {
    "train-tokenizer": (TrainTokenizerConfig, {"corpus": ["c.txt"], "output": "tok"}),
    "prepare": (PrepareConfig, {"corpus": ["c.txt"], "tokenizer": "tok", "output": "data"}),
    "pretrain": (PretrainConfig, {"data": "data", "output": "run", "model_config": "albert-debug"}),
    "finetune": (
        FinetuneConfig,
        {"model": "m", "train_file": "train.tsv", "dev_file": "dev.tsv", "output_dir": "out", "data": {"task": "sst2"}},
    ),
    "evaluate": (EvaluateConfig, {"model": "m", "data_file": "dev.tsv", "data": {"task": "sst2"}}),
    "predict": (EvaluateConfig, {"model": "m", "data_file": "test.tsv", "data": {"task": "sst2"}}),
    "ablate": (AblateConfig, {"study": "depth", "corpus": ["c.txt"], "output": "out", "steps": 10}),
}
#: settings a field's non-default value needs besides it
NEEDS = {
    "dupe_factor": {"static_masking": True},
    "partition": {"num_partitions": 2},
    "num_partitions": {"partition": 0},  # N > 1 needs the part this run writes
    "eval_steps": {"eval_data": "e"},  # pretrain: evaluation options need evaluation data
    "max_eval_batches": {"eval_data": "e"},
}


def _leaves(cls, prefix=()):
    """(path, dataclasses.Field, FieldType, Setting) of every leaf setting, nested configs flattened."""
    ftypes = S.field_types(cls)
    for f in dataclasses.fields(cls):
        ft = ftypes[f.name]
        if ft.nested:
            yield from _leaves(ft.scalar, (*prefix, f.name))
        else:
            yield (*prefix, f.name), f, ft, S.meta(f)


def _option(cls, path):
    owner = cls
    for name in path[:-1]:
        owner = S.field_types(owner)[name].scalar
    return S.option_name(owner, path[-1])


def _argv(cls, values: dict, prefix=()) -> list[str]:
    """Command-line tokens that set ``values`` (nested dicts for nested configs)."""
    out = []
    for path, _, ft, m in _leaves(cls):
        value = values
        for name in path:
            if not isinstance(value, dict) or name not in value:
                break
            value = value[name]
        else:
            out += _tokens(cls, path, ft, m, value)
    return out


def _tokens(cls, path, ft, m, value) -> list[str]:
    option = _option(cls, path)
    if m.const is not S.NO_CONST:
        return [option] if value == m.const else []
    if ft.scalar is bool:
        opposite = "--" + option[5:] if option.startswith("--no-") else "--no-" + option[2:]
        return [option if value != m.negate else opposite]
    if ft.container is not None:
        return [option, *map(str, value)]
    return [option, str(value)]


def _non_default(f, ft, m):
    """A valid value other than the default."""
    default = S.default_of(f)
    if m.const is not S.NO_CONST:
        return m.const
    if ft.scalar is bool:
        return not default
    if m.choices is not None:
        pick = [c for c in m.choices if c != default]
        return tuple(pick[:2]) if ft.container is not None else pick[0]
    if ft.scalar is int:
        if isinstance(default, int):
            return default + 1
        low = m.gt + 1 if m.gt is not None else m.ge if m.ge is not None else 0
        return int(low) + 2
    if ft.scalar is float:
        return default / 2 if default else 0.25
    if f.name == "task":
        return "mrpc"
    if f.name == "resume":
        return "auto"
    if f.name == "partition":  # int | "auto"; 1 of --num-partitions 2 (NEEDS)
        return 1
    if ft.container is not None:
        return ["a.txt", "b.txt"]
    return f"{f.name}-value"


def _out_of_bounds(ft, m):
    if m.gt is not None:
        bad = m.gt
    elif m.ge is not None:
        bad = m.ge - 1
    elif m.lt is not None:
        bad = m.lt
    else:
        bad = m.le + (1 if ft.scalar is int else 0.5)
    return ft.scalar(bad)


def _set(values: dict, path, value) -> dict:
    values = json.loads(json.dumps(values))
    target = values
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value
    return values


def _parse(argv):
    return config_from_args(build_parser().parse_args(argv))


def _get(cfg, path):
    for name in path:
        cfg = getattr(cfg, name)
    return cfg


def _cases():
    return [
        pytest.param(command, path, id=f"{command}:{'.'.join(path)}")
        for command, (cls, _) in COMMANDS.items()
        for path, *_ in _leaves(cls)
    ]


def test_every_derived_command_is_walked():
    sub = build_parser()._subparsers._group_actions[0].choices
    derived = {name for name, p in sub.items() if p.get_default("_settings_class") is not None}
    assert derived == set(COMMANDS)
    for name, (cls, _) in COMMANDS.items():
        assert sub[name].get_default("_settings_class") is cls


@pytest.mark.parametrize("command", COMMANDS)
def test_command_defaults_are_the_dataclass_defaults(command):
    cls, required = COMMANDS[command]
    assert _parse([command, *_argv(cls, required)]) == cls(**required)
    with pytest.raises(SystemExit) as exc:  # each required setting is required on the command line too
        _parse([command])
    assert exc.value.code == 2


@pytest.mark.parametrize("command, path", _cases())
def test_every_field_settable_from_cli_and_config_file(command, path, tmp_path):
    cls, required = COMMANDS[command]
    _, f, ft, m = next(leaf for leaf in _leaves(cls) if leaf[0] == path)
    value = _non_default(f, ft, m)
    values = _set(required, path, value)
    fields = {f.name for f in dataclasses.fields(cls)}
    for name, extra in NEEDS.items():
        if path[-1] == name:
            values = {**values, **{k: v for k, v in extra.items() if k in fields}}  # (finetune has no eval_data)
    expected = cls(**values)
    assert _get(expected, path) != _get(cls(**required), path), "the test value must differ from the default"
    assert _parse([command, *_argv(cls, values)]) == expected
    file = tmp_path / "settings.json"
    file.write_text(json.dumps(values))
    assert _parse([command, "--config", str(file)]) == expected
    # the command line overrides the file: the file sets the value, the command line the default back
    if (
        path[-1] not in required
        and ft.container is None
        and ft.scalar not in (bool,)
        and m.const is S.NO_CONST
        and S.default_of(f) is not None
    ):
        cfg = _parse([command, "--config", str(file), _option(cls, path), str(S.default_of(f))])
        assert _get(cfg, path) == S.default_of(f)
    # a bool too, either way (compile: true in the file, --no-compile here; progress_bar: false, --progress-bar)
    if path[-1] not in required and ft.scalar is bool and ft.container is None and m.const is S.NO_CONST:
        (back,) = _tokens(cls, path, ft, m, S.default_of(f))
        (there,) = _tokens(cls, path, ft, m, value)
        assert back != there
        assert _get(_parse([command, "--config", str(file), back]), path) == S.default_of(f)
        assert _get(_parse([command, *_argv(cls, required), back, there]), path) == value  # the last one wins


@pytest.mark.parametrize(
    "command, path",
    [
        p
        for p in _cases()
        if any(
            getattr(leaf[3], b) is not None
            for leaf in _leaves(COMMANDS[p.values[0]][0])
            if leaf[0] == p.values[1]
            for b in ("gt", "ge", "lt", "le")
        )
    ],
)
def test_bounds_are_enforced_on_cli_and_config_file_naming_the_option(command, path, tmp_path, capsys):
    cls, required = COMMANDS[command]
    _, _, ft, m = next(leaf for leaf in _leaves(cls) if leaf[0] == path)
    bad = _out_of_bounds(ft, m)
    option = _option(cls, path)
    assert main([command, *_argv(cls, required), option, str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {option} {bad!r}: must be "), err
    file = tmp_path / "settings.json"
    file.write_text(json.dumps(_set(required, path, bad)))
    assert main([command, "--config", str(file)]) == 2
    assert capsys.readouterr().err.strip() == err
    with pytest.raises(LitebertError, match=f"^{option} "):  # and the library refuses it the same way
        cls(**_set(required, path, bad))


@pytest.mark.parametrize(
    "command, path",
    [p for p in _cases() if next(leaf for leaf in _leaves(COMMANDS[p.values[0]][0]) if leaf[0] == p.values[1])[2].scalar
     is float],
)  # fmt: skip
def test_non_finite_floats_are_refused_on_cli_and_config_file_naming_the_option(command, path, tmp_path, capsys):
    """Defect: `--learning-rate inf` passed its bound (> 0) and the run died at its first step, pointing at a
    checkpoint that did not exist; `nan` failed as "must be > 0". Every float setting now refuses inf, -inf and nan
    as not finite, before anything runs, on the command line, in a --config file and from the library."""
    cls, required = COMMANDS[command]
    option = _option(cls, path)
    file = tmp_path / "settings.json"
    for text, bad in (("inf", float("inf")), ("-inf", float("-inf")), ("nan", float("nan"))):
        assert main([command, *_argv(cls, required), f"{option}={text}"]) == 2
        assert capsys.readouterr().err == f"error: {option} {bad!r}: must be a finite number\n"
        file.write_text(json.dumps(_set(required, path, bad)))  # JSON's Infinity / NaN
        assert main([command, "--config", str(file)]) == 2
        assert capsys.readouterr().err == f"error: {option} {bad!r}: must be a finite number\n"
        with pytest.raises(LitebertError) as exc:
            cls(**_set(required, path, bad))
        assert str(exc.value) == f"{option} {bad!r}: must be a finite number"


def test_config_file_errors_name_the_key_and_the_closest_valid_one(tmp_path, capsys):
    file = tmp_path / "s.json"
    file.write_text(json.dumps({"data": "d", "output": "o", "model_config": "m", "max_stepz": 3}))
    assert main(["pretrain", "--config", str(file)]) == 2
    assert "unknown setting 'max_stepz' (did you mean 'max_steps'?)" in capsys.readouterr().err
    file.write_text(
        json.dumps({"model": "m", "train_file": "t", "dev_file": "d", "output_dir": "o", "data": {"taks": "sst2"}})
    )
    assert main(["finetune", "--config", str(file)]) == 2
    assert "data: unknown setting 'taks' (did you mean 'task'?)" in capsys.readouterr().err
    file.write_text("{not json")
    assert main(["pretrain", "--config", str(file)]) == 2
    assert f"--config {file}: not valid JSON" in capsys.readouterr().err
    assert main(["pretrain", "--config", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_scalar_where_a_table_of_settings_goes_is_one_error_line(tmp_path, capsys):
    """Defect: `data = "sst2"` in a finetune config file ended in AttributeError: 'str' object has no attribute
    'task_spec' (exit 1); a top-level `task` was answered with "did you mean 'data'?"."""
    required = 'model = "m"\ntrain_file = "t.tsv"\ndev_file = "d.tsv"\n'
    toml = tmp_path / "c6.toml"
    toml.write_text(required + 'max_steps = 2\ndata = "sst2"\n')
    assert main(["finetune", "--config", str(toml), "--output", str(tmp_path / "o1")]) == 2
    assert capsys.readouterr().err == (
        f"error: --config {toml}: 'data' must be a table of data settings, not str 'sst2': e.g. [data] task = "
        '"sst2" in TOML, "data": {"task": "sst2"} in JSON\n'
    )
    toml.write_text(required + 'output_dir = "o"\ntask = "sst2"\n')
    assert main(["finetune", "--config", str(toml)]) == 2
    assert "unknown setting 'task' (did you mean [data] task? it belongs in the data table)" in capsys.readouterr().err
    for command, values in (
        ("evaluate", {"model": "m", "data_file": "d.tsv", "data": ["sst2"]}),
        ("finetune", {"model": "m", "train_file": "t", "dev_file": "d", "output_dir": "o", "data": None}),
    ):
        file = tmp_path / "s.json"
        file.write_text(json.dumps(values))
        assert main([command, "--config", str(file)]) == 2
        err = capsys.readouterr().err
        assert f"--config {file}: 'data' must be a table of data settings, not " in err and "Traceback" not in err
    file.write_text(json.dumps({"model": "m", "data_file": "d.tsv", "data": None}))  # evaluate's data is optional
    assert _parse(["evaluate", "--config", str(file)]).data is None
    # and the library: the nested config or a dict of its settings, nothing else
    with pytest.raises(
        LitebertError, match=r"^setting 'data': expected DataOptions \(or a dict of its settings\), got"
    ):
        FinetuneConfig(model="m", train_file="t", dev_file="d", output_dir="o", data="sst2")
    assert FinetuneConfig(model="m", train_file="t", dev_file="d", output_dir="o", data={"task": "sst2"}).data.task


def test_toml_config_and_run_settings_section(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('data = "d"\noutput = "o"\nmodel_config = "albert-debug"\nmax_steps = 7\nlearning_rate = 1e-3\n')
    cfg = _parse(["pretrain", "--config", str(toml), "--max-steps", "9"])
    assert (cfg.max_steps, cfg.learning_rate, cfg.data) == (9, 1e-3, "d")
    # a run_settings.json: the settings are its "pretrain_config" section, the other keys are the run's record
    run = tmp_path / "run_settings.json"
    run.write_text(json.dumps({"pretrain_config": S.to_dict(cfg), "world_size": 1, "argv": ["litebert"]}))
    assert _parse(["pretrain", "--config", str(run)]) == cfg
    assert _parse(["pretrain", "--config", str(run), "--output", "new"]) == dataclasses.replace(cfg, output="new")


def test_another_commands_run_settings_is_one_error_naming_both_commands(tmp_path, capsys):
    """evaluate --config FINETUNE/run_settings.json: finetune's settings (its --model is the base model), refused as
    such, not as an unknown key 'command'."""
    cfg = FinetuneConfig(**COMMANDS["finetune"][1])
    run = tmp_path / "run_settings.json"
    run.write_text(json.dumps({"command": "finetune", "finetune_config": S.to_dict(cfg), "world_size": 1}))
    assert _parse(["finetune", "--config", str(run)]) == cfg
    assert main(["evaluate", "--config", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: --config {run}: holds the settings of `litebert finetune`, not of `litebert evaluate`: give a "
        "run_settings.json that `litebert evaluate` wrote, or a file of its own settings (--help lists them)"
    )
    # evaluate's and predict's settings are the same: either reads the other's run settings
    ecfg = EvaluateConfig(**COMMANDS["evaluate"][1])
    run.write_text(json.dumps({"command": "evaluate", "evaluate_config": S.to_dict(ecfg)}))
    assert _parse(["predict", "--config", str(run)]) == _parse(["evaluate", "--config", str(run)]) == ecfg


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compile_mode_implies_compile_and_round_trips(tmp_path, mode):
    """--compile-mode implies --compile: the config (what run_settings.json records) says compile: true, and a
    run_settings.json with it reads back to the same config."""
    cfg = _parse(["pretrain", "--data", "d", "--output", "o", "--model-config", "albert-debug", "--compile-mode", mode])
    assert (cfg.compile, cfg.compile_mode) == (True, mode)
    assert S.to_dict(cfg)["compile"] is True
    run = tmp_path / "run_settings.json"
    run.write_text(json.dumps({"pretrain_config": S.to_dict(cfg)}))
    assert _parse(["pretrain", "--config", str(run)]) == cfg
    plain = _parse(["pretrain", "--data", "d", "--output", "o", "--model-config", "albert-debug"])
    assert (plain.compile, plain.compile_mode) == (False, None)


def test_unknown_option_is_reported_before_missing_required_ones(capsys):
    """Defect 8: `--max-stepz` with --model-config missing said only "the following arguments are required"."""
    with pytest.raises(SystemExit) as exc:
        main(["pretrain", "--data", "d", "--output", "o", "--max-stepz", "5"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "unrecognized arguments: --max-stepz 5 (--max-stepz: did you mean --max-steps?)" in err
    assert "required" not in err
    with pytest.raises(SystemExit):  # also for commands not derived from a config
        main(["convert-tf", "--chekpoint", "x"])
    assert "did you mean --checkpoint?" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the missing options are still named once the options are right
        main(["pretrain", "--data", "d", "--output", "o"])
    assert "the following arguments are required: --model-config" in capsys.readouterr().err


def test_one_error_format_and_library_defaults():
    with pytest.raises(LitebertError, match=r"^--warmup-steps 20: must not exceed --max-steps$"):
        PretrainConfig(data="d", output="o", model_config="m", max_steps=10, warmup_steps=20)
    with pytest.raises(LitebertError, match=r"^--max-steps '10': expected an integer$"):
        PretrainConfig(data="d", output="o", model_config="m", max_steps="10")
    with pytest.raises(LitebertError, match=r"^--on-invalid-utf8 'drop': expected one of skip, error$"):
        PrepareConfig(corpus="c", tokenizer="t", output="o", on_invalid="drop")
    with pytest.raises(LitebertError, match=r"^--task 'no_such_task': unknown task"):
        DataOptions(task="no_such_task")
    assert DataOptions(task="sst-2").task == "sst-2" and DataOptions(task="weibo_ner").task == "weibo_ner"
    # --dupe-factor: 10 passes with --static-masking (BERT's create_pretraining_data.py), 1 without
    assert PrepareConfig(corpus="c", tokenizer="t", output="o", static_masking=True).dupe_factor == 10
    assert PrepareConfig(corpus="c", tokenizer="t", output="o").dupe_factor == 1
    assert (
        _parse(["prepare", "--corpus", "c", "--tokenizer", "t", "--output", "o", "--static-masking"]).dupe_factor == 10
    )


def test_bias_correction_without_lamb_is_refused_naming_both_options(tmp_path, capsys):
    """Defect: `--bias-correction --optimizer adamw` was accepted and changed nothing (the option is LAMB's). Now it
    is refused as the other inapplicable combinations are (one error naming both options), from the command line,
    a --config file and the library."""
    required = ["pretrain", "--data", "d", "--output", str(tmp_path / "run"), "--model-config", "albert-debug"]
    message = (
        "--bias-correction True: applies to --optimizer lamb only, not --optimizer adamw (AdamW always corrects its "
        "bias)"
    )
    assert main([*required, "--optimizer", "adamw", "--bias-correction"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    file = tmp_path / "settings.json"
    file.write_text(json.dumps({"optimizer": "adamw", "bias_correction": True}))
    assert main([*required, "--config", str(file)]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    with pytest.raises(LitebertError) as exc:
        PretrainConfig(data="d", output="o", model_config="m", optimizer="adamw", bias_correction=True)
    assert str(exc.value) == message
    assert not (tmp_path / "run").exists()
    assert _parse([*required, "--bias-correction"]).bias_correction is True  # LAMB's (the default optimizer)
    assert _parse([*required, "--optimizer", "adamw", "--no-bias-correction"]).optimizer == "adamw"


#: every option released before the options were derived from the configs (a contract: none may disappear)
RELEASED_OPTIONS = {
    "train-tokenizer": "--corpus --format --keep-accents --kind --lowercase --no-lowercase --output "
    "--seed --vocab-size",
    "prepare": (
        "--corpus --dupe-factor --format --inter-sentence-task --masked-lm-prob --max-ngram "
        "--max-position-embeddings --max-predictions-per-seq --max-seq-length --no-progress --no-progress-bar "
        "--on-invalid-utf8 --output --overwrite --seed --shard-size --short-seq-prob --static-masking "
        "--tokenizer --whole-word-mask-zh --workers"
    ),
    "pretrain": (
        "--adam-epsilon --batch-size --bias-correction --compile --data --device --eval-data --eval-steps "
        "--fsdp --gradient-accumulation-steps --init-from --learning-rate --logging-steps --lr-decay-power "
        "--max-eval-batches --max-grad-norm --max-steps --model-config --no-progress --no-progress-bar "
        "--num-workers --optimizer --output --precision --resume --save-steps --save-total-limit --seed "
        "--warmup-steps --weight-decay"
    ),
    "plot": "--out",
    "export": "--output",
    "finetune": (
        "--batch-size --classifier-dropout --data-seed --delimiter --dev --device --early-stopping-patience "
        "--epochs --eval-batch-size --eval-steps --hidden-dropout --init --label-column --label-separator "
        "--learning-rate --logging-steps --max-eval-examples --max-grad-norm --max-seq-length --max-steps "
        "--max-train-examples --metric --model --no-checkpoints --no-header --no-progress --no-progress-bar "
        "--optimizer --output --precision --problem-type --resume --seed --task --test --text-column "
        "--text-pair-column --tokenizer --train --warmup-ratio --weight-decay"
    ),
    "evaluate": (
        "--batch-size --data --delimiter --device --label-column --label-separator --max-examples "
        "--max-seq-length --metric --model --no-header --output --task --text-column --text-pair-column "
        "--tokenizer"
    ),
    "predict": (
        "--batch-size --data --delimiter --device --label-column --label-separator --max-examples "
        "--max-seq-length --model --no-header --output --task --text-column --text-pair-column --tokenizer"
    ),
    "convert-tf": "--checkpoint --config --heads --layout --output --skip-unknown --spm-model --vocab",
}


def test_every_released_option_still_exists():
    sub = build_parser()._subparsers._group_actions[0].choices
    for command, options in RELEASED_OPTIONS.items():
        have = {s for a in sub[command]._actions for s in a.option_strings}
        assert set(options.split()) <= have, (command, sorted(set(options.split()) - have))


def test_evaluation_options_without_eval_data_are_refused():
    """`pretrain --eval-steps 1` without --eval-data ran without evaluating and without a word."""
    from litebert.training.pretrain import PretrainConfig

    for opt, value in (("eval_steps", 1), ("max_eval_batches", 4)):
        with pytest.raises(LitebertError) as err:
            PretrainConfig(data="d", output="o", model_config="albert-debug", **{opt: value})
        assert str(err.value) == f"--{opt.replace('_', '-')} {value}: evaluates on --eval-data, which is not given"
        PretrainConfig(data="d", output="o", model_config="albert-debug", eval_data="e", **{opt: value})
