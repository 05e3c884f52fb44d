"""Model cards (litebert/training/modelcard.py): every ``final/`` and ``best/`` carries a ``README.md`` whose YAML
block huggingface_hub parses (``metadata_load``, ``ModelCard.load``) into the Hub's metadata, with the real metrics
of the run (``best_eval.json``; pretraining: the last evaluation in ``metrics.jsonl``), the base model and data set
when they came from the Hub (tests/_fake_hub.py), and a body with the run's settings and how to load the model."""

from __future__ import annotations

import json
import random

import pytest
from huggingface_hub import ModelCard, metadata_load

from litebert import __version__
from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.data import PrepareConfig, prepare
from litebert.finetune import DataOptions, FinetuneConfig, finetune
from litebert.modeling import AlbertForPreTraining
from litebert.tokenization import train_tokenizer
from litebert.training.pretrain import PretrainConfig, pretrain

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A corpus of made-up words, its SentencePiece tokenizer, prepared shards, a random albert-debug model
    directory and SST-2-like train/dev files (sentence, label)."""
    root = tmp_path_factory.mktemp("card")
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6))) for _ in range(200)]
    docs = ["\n".join(" ".join(rng.choice(words) for _ in range(8)) + " ." for _ in range(5)) for _ in range(40)]
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    tok = train_tokenizer([root / "corpus.txt"], "sentencepiece", 300, root / "model")
    AlbertForPreTraining(AlbertConfig.from_preset("albert-debug", vocab_size=tok.vocab_size)).save_pretrained(
        root / "model"
    )
    prepare(
        PrepareConfig(
            corpus=[str(root / "corpus.txt")],
            tokenizer=str(root / "model"),
            output=str(root / "data"),
            max_seq_length=32,
            progress=False,
        )
    )
    for name, n in (("train", 48), ("dev", 24)):
        rows = ["sentence\tlabel"] + [f"{' '.join(rng.choice(words) for _ in range(6))}\t{i % 2}" for i in range(n)]
        (root / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def _results(meta: dict) -> tuple[dict, dict]:
    """(the first model-index result without its metrics, {metric type: value})."""
    (entry,) = meta["model-index"]
    (result,) = entry["results"]
    return result, {m["type"]: m["value"] for m in result["metrics"]}


def test_best_card_holds_the_run_metrics_and_settings(synthetic, tmp_path):
    cfg = FinetuneConfig(
        model=str(synthetic / "model"),
        train_file=str(synthetic / "train.tsv"),
        dev_file=str(synthetic / "dev.tsv"),
        output_dir=str(tmp_path / "sst2"),
        data=DataOptions(task="sst2"),
        batch_size=8,
        max_steps=4,
        eval_steps=2,
        learning_rate=1e-3,
        max_seq_length=24,
        progress_bar=False,
    )
    result = finetune(cfg)
    card_path = result.best_dir / "README.md"
    meta = metadata_load(card_path)
    assert meta["license"] == "apache-2.0" and meta["language"] == ["en"]
    assert {"albert", "litebert", "text-classification", "sst2"} <= set(meta["tags"])
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert "base_model" not in meta and "datasets" not in meta  # a local model, local files: nothing on the Hub
    best = json.loads((result.best_dir / "best_eval.json").read_text())
    result_meta, metrics = _results(meta)
    assert metrics == {k: v for k, v in best.items() if k != "step"} and "accuracy" in metrics
    assert result_meta["task"]["type"] == "text-classification"
    assert result_meta["dataset"] == {"name": "sst2: dev.tsv", "type": "sst2", "split": "dev"}

    card = ModelCard.load(card_path)
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == metrics
    assert f"litebert {__version__}" in card.text and "| learning_rate | 0.001 |" in card.text
    assert "| max_steps | 4 |" in card.text and "AutoModelForSequenceClassification" in card.text
    assert f"| accuracy | {metrics['accuracy']:.4f} |" in card.text
    # what it started from: a local model by its directory's name, in the body only (the Hub validates base_model
    # as a repository id)
    assert "fine-tuned for sst2 from a local model (`model`)" in card.text
    # load snippets: the placeholder id litebert push replaces, and a placeholder path for a local copy
    assert 'AutoModelForSequenceClassification.from_pretrained("YOUR_ORG/YOUR_MODEL")' in card.text
    assert 'from_pretrained("path/to/best")' in card.text
    assert "litebert predict --model path/to/best --data FILE.tsv" in card.text
    assert "ORG/sst2" not in card.text
    # the card goes to the Hub: no local path in it (it said `from the local directory /home/.../sst2/best`)
    assert str(tmp_path) not in card.text and str(synthetic) not in card.text

    transformers = pytest.importorskip("transformers")
    transformers.AutoModelForSequenceClassification.from_pretrained(result.best_dir)  # the card disturbs nothing


def test_final_card_holds_the_last_evaluation(synthetic, tmp_path):
    out = tmp_path / "pre"
    result = pretrain(
        PretrainConfig(
            data=str(synthetic / "data"),
            eval_data=str(synthetic / "data"),
            output=str(out),
            model_config="albert-debug",
            max_steps=2,
            batch_size=4,
            eval_steps=2,
            logging_steps=1,
            progress_bar=False,
            device="cpu",
        )
    )
    meta = metadata_load(result.final_dir / "README.md")
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in evals if r.get("split") == "eval"][-1]
    result_meta, metrics = _results(meta)
    assert metrics and metrics == {k: v for k, v in last.items() if k in metrics}
    assert set(metrics) >= {"mlm_accuracy", "mlm_perplexity"}
    assert meta["pipeline_tag"] == "fill-mask" and result_meta["dataset"]["name"] == "corpus.txt"
    assert result_meta["dataset"]["type"] == "pretraining-corpus"
    text = ModelCard.load(result.final_dir / "README.md").text
    assert "pretrained (masked LM + sentence-order prediction) from random weights" in text
    manifest = json.loads((synthetic / "data" / "manifest.json").read_text())
    assert manifest["settings"]["max_seq_length"] == 32 and "| max_seq_length | 32 |" in text  # prepare's
    assert "base_model" not in meta
    assert "litebert finetune --model path/to/final --task sst2" in text
    assert str(out) not in text and str(synthetic) not in text


def test_final_card_names_the_data_its_metrics_were_measured_on(synthetic, fake_hub, tmp_path):
    """The model-index's data set is ``--eval-data``'s corpus (where the metrics come from), not the training
    corpus; a Hub training corpus (``hf://``) is the card's ``datasets`` and a Hub eval corpus the model-index's
    data set by its id, config, split and the commit read."""
    (tmp_path / "held_out.txt").write_text((synthetic / "corpus.txt").read_text(encoding="utf-8"), encoding="utf-8")
    prepared = {}
    for name, corpus in (("local", str(tmp_path / "held_out.txt")), ("hub", "hf://org/wiki:en#validation")):
        if name == "hub":
            rows = (synthetic / "corpus.txt").read_text(encoding="utf-8").split("\n\n")
            lines = "".join(json.dumps({"text": doc}) + "\n" for doc in rows if doc.strip())
            card = (
                "---\nconfigs:\n- config_name: en\n  data_files:\n  - split: validation\n    path: en/val.jsonl\n---\n"
            )
            sha = fake_hub.add_repo("org/wiki", {"README.md": card, "en/val.jsonl": lines}, repo_type="dataset")
        prepared[name] = tmp_path / f"data-{name}"
        prepare(
            PrepareConfig(
                corpus=[corpus],
                tokenizer=str(synthetic / "model"),
                output=str(prepared[name]),
                max_seq_length=32,
                progress=False,
            )
        )

    def card(data, eval_data, out):
        config = PretrainConfig(
            data=str(data),
            eval_data=str(eval_data),
            output=str(tmp_path / out),
            model_config="albert-debug",
            max_steps=1,
            batch_size=4,
            eval_steps=1,
            progress_bar=False,
            device="cpu",
        )
        return metadata_load(pretrain(config).final_dir / "README.md")

    meta = card(synthetic / "data", prepared["local"], "local")  # trained on corpus.txt, measured on held_out.txt
    result_meta, _ = _results(meta)
    assert result_meta["dataset"] == {"name": "held_out.txt", "type": "pretraining-corpus", "split": "held-out"}
    assert "datasets" not in meta

    meta = card(prepared["hub"], prepared["hub"], "hub")
    assert meta["datasets"] == ["org/wiki"]
    result_meta, _ = _results(meta)
    assert result_meta["dataset"] == {
        "name": "hf://org/wiki:en#validation",
        "type": "org/wiki",
        "config": "en",
        "split": "validation",
        "revision": sha,
    }


def test_final_card_names_a_local_init_from_in_the_body_only(synthetic, tmp_path):
    out = tmp_path / "continued"
    result = pretrain(
        PretrainConfig(
            data=str(synthetic / "data"),
            output=str(out),
            init_from=str(synthetic / "model"),
            model_config=str(synthetic / "model" / "config.json"),
            max_steps=1,
            batch_size=4,
            progress_bar=False,
            device="cpu",
        )
    )
    meta = metadata_load(result.final_dir / "README.md")
    assert "base_model" not in meta
    text = (result.final_dir / "README.md").read_text()
    assert "pretrained (masked LM + sentence-order prediction) from a local model (`model`)" in text
    assert str(tmp_path) not in text and str(synthetic) not in text


def test_card_of_a_hub_model_fine_tuned_on_hub_data(fake_hub, synthetic, tmp_path, monkeypatch):
    """Base model and data set from the (local) Hub: ``base_model``, ``datasets`` and the model-index's data set
    (id, config, split, the commit read) name them."""
    datasets = pytest.importorskip("datasets")
    import io

    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["negative", "positive"])}
    )
    readme = ["---", "configs:", "- config_name: sst2", "  data_files:"]
    files: dict[str, bytes | str] = {}
    for name, split in (("train", "train"), ("dev", "validation")):
        lines = (synthetic / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        rows = [{"sentence": s, "label": int(y)} for s, y in (line.split("\t") for line in lines)]
        buffer = io.BytesIO()
        datasets.Dataset.from_list(rows, features=features).to_parquet(buffer)
        files[f"sst2/{split}-00000-of-00001.parquet"] = buffer.getvalue()
        readme += [f"  - split: {split}", f"    path: sst2/{split}-*"]
    files["README.md"] = "\n".join([*readme, "---", ""])
    data_sha = fake_hub.add_repo("nyu-mll/glue", files, repo_type="dataset")
    fake_hub.add_dir("org/base", synthetic / "model")

    out = tmp_path / "run"
    argv = ["finetune", "--model", "org/base", "--task", "sst2", "--output", str(out), "--max-steps", "2"]
    assert main([*argv, "--batch-size", "8", "--max-seq-length", "24", "--no-progress"]) == 0
    meta = metadata_load(out / "best" / "README.md")
    assert meta["base_model"] == "org/base" and meta["datasets"] == ["nyu-mll/glue"]
    result_meta, metrics = _results(meta)
    assert result_meta["dataset"] == {
        "name": "nyu-mll/glue (sst2)",
        "type": "nyu-mll/glue",
        "config": "sst2",
        "split": "validation",
        "revision": data_sha,
    }
    best = json.loads((out / "best" / "best_eval.json").read_text())
    assert metrics == {k: v for k, v in best.items() if k != "step"}
    assert (
        "fine-tuned for sst2 from [org/base](https://huggingface.co/org/base)"
        in (out / "best" / "README.md").read_text()
    )

    # pushed: the card's load snippets name the repository; the local card is left as it was (the placeholder)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    local = (out / "best" / "README.md").read_bytes()
    assert main(["push", str(out / "best"), "--repo-id", "me/sst2-test"]) == 0
    assert (out / "best" / "README.md").read_bytes() == local
    pushed = fake_hub.repos["model", "me/sst2-test"].files()["README.md"].decode()
    assert 'from_pretrained("me/sst2-test")' in pushed and "YOUR_ORG/YOUR_MODEL" not in pushed
    assert "litebert predict --model me/sst2-test --data FILE.tsv" in pushed
    assert "`me/sst2-test` is this model's repository on the Hub" in pushed and "stands for" not in pushed
    assert str(tmp_path) not in pushed and str(synthetic) not in pushed
    use = pushed[pushed.index("## Use") :]
    assert use == local.decode()[local.decode().index("## Use") :].replace(
        "`YOUR_ORG/YOUR_MODEL` stands for the Hub repository this model is uploaded to (`litebert push` writes it in)",
        "`me/sst2-test` is this model's repository on the Hub",
    ).replace("YOUR_ORG/YOUR_MODEL", "me/sst2-test")


def test_final_card_of_a_hub_init_from_names_it_as_base_model(fake_hub, synthetic, tmp_path):
    from litebert.hub import resolve_config

    fake_hub.add_dir("org/base", synthetic / "model")
    cfg = PretrainConfig(
        data=str(synthetic / "data"),
        output=str(tmp_path / "continued"),
        init_from="org/base",
        model_config=str(synthetic / "model" / "config.json"),
        max_steps=1,
        batch_size=4,
        progress_bar=False,
        device="cpu",
    )
    result = pretrain(resolve_config(cfg))  # as the command line does: the Hub id downloaded
    meta = metadata_load(result.final_dir / "README.md")
    assert meta["base_model"] == "org/base"
    assert "from [org/base](https://huggingface.co/org/base)" in (result.final_dir / "README.md").read_text()


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece", "chinese"])
def test_card_language_follows_the_vocabulary_whatever_the_tokenizer_kind(tmp_path, kind):
    """A SentencePiece model trained on Chinese text is a Chinese model too (the card said ``en`` for it)."""
    from litebert.training.modelcard import _language

    rng = random.Random(0)
    chars = [chr(0x4E00 + i) for i in range(900)]  # 900 distinct CJK characters, each a vocabulary entry
    lines = ["".join(rng.choice(chars) for _ in range(rng.randint(8, 30))) + "。" for _ in range(4000)]
    zh = tmp_path / "zh.txt"
    zh.write_text("\n".join(lines) + "\n", encoding="utf-8")
    train_tokenizer([zh], kind, 1500, tmp_path / "zh-tok", character_coverage=1.0)
    assert _language(tmp_path / "zh-tok") == "zh"
    words = ["the", "film", "was", "released", "in", "united", "states", "kingdom", "music", "album"]
    en = tmp_path / "en.txt"
    en.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)) + " ." for _ in range(2000)) + "\n")
    if kind != "chinese":
        train_tokenizer([en], kind, 200, tmp_path / "en-tok")
        assert _language(tmp_path / "en-tok") == "en"
