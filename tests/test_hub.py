"""Models and tokenizers from the Hub (litebert.hub), through the real huggingface_hub client and the local Hub of
tests/_fake_hub.py: transformers-layout ALBERT repositories (``pytorch_model.bin`` only, ``spiece.model``,
``tokenizer.json``, a Chinese ``vocab.txt``) load with transformers' outputs, only the needed files are downloaded,
a second run works offline from the cache, the command line takes Hub ids with ``--revision`` and records the
commit in ``run_settings.json``, and every bad id / revision / access is one clear error before any work."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch

from litebert import hub
from litebert.cli import main
from litebert.errors import LitebertError
from litebert.modeling import AlbertForMaskedLM
from litebert.tokenization import load_tokenizer, train_tokenizer

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "fast",
    "slow",
    "big",
    "small",
    "red",
    "blue",
    "green",
    "house",
    "tree",
    "car",
    "road",
    "city",
    "river",
]
TEXTS = ["the cat sat on the mat.", "a big red car ran fast on the road", "Blue river, green tree!"]


@pytest.fixture(scope="module")
def spm_tokenizer(tmp_path_factory) -> Path:
    """A SentencePiece tokenizer (ALBERT's layout: spiece.model, tokenizer.json) trained on generated text."""
    root = tmp_path_factory.mktemp("spm")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(400)]
    (root / "corpus.txt").write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    train_tokenizer([root / "corpus.txt"], "sentencepiece", 60, root / "tok")
    return root / "tok"


def _hf_albert(vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.AlbertConfig(
        vocab_size=vocab_size,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    return transformers.AlbertForMaskedLM(config).eval()


def _bin_files(model, tmp_path: Path) -> dict[str, bytes]:
    """transformers' files of ``model`` with the weights as ``pytorch_model.bin`` only (the older Hub layout)."""
    out = tmp_path / "hf_bin"
    model.save_pretrained(out, safe_serialization=False)
    if not (out / "pytorch_model.bin").exists():  # transformers 5 writes safetensors whatever is asked
        torch.save(model.state_dict(), out / "pytorch_model.bin")
    return {
        "config.json": (out / "config.json").read_bytes(),
        "pytorch_model.bin": (out / "pytorch_model.bin").read_bytes(),
    }


def _same_outputs(directory: Path, texts: list[str], hf_tokenizer) -> None:
    """litebert and transformers, each loading ``directory``: same token ids, same MLM logits."""
    ours_tok = load_tokenizer(directory)
    ours = AlbertForMaskedLM.from_pretrained(directory)
    theirs = transformers.AlbertForMaskedLM.from_pretrained(directory).eval()
    for text in texts:
        ids = ours_tok.encode(text, add_special_tokens=True)
        assert ids == hf_tokenizer(text)["input_ids"], text
        x = torch.tensor([ids])
        with torch.no_grad():
            torch.testing.assert_close(ours(x).logits, theirs(x).logits, rtol=1e-5, atol=1e-5)


def _snapshot_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_bin_only_spiece_repository_matches_transformers(fake_hub, spm_tokenizer, tmp_path):
    """albert-base-v1's layout: config.json, pytorch_model.bin, spiece.model (and files litebert does not read)."""
    model = _hf_albert(load_tokenizer(spm_tokenizer).vocab_size)
    files = {**_bin_files(model, tmp_path), "spiece.model": (spm_tokenizer / "spiece.model").read_bytes()}
    sha = fake_hub.add_repo("albert/tiny-v1", {**files, "tf_model.h5": b"\0" * 64, "README.md": b"# tiny"})
    directory = hub.resolve("albert/tiny-v1")
    assert directory.name == sha and _snapshot_files(directory) == ["config.json", "pytorch_model.bin", "spiece.model"]
    _same_outputs(directory, TEXTS, transformers.AlbertTokenizer.from_pretrained(directory))
    assert hub.snapshot_source(directory) == {"repo_id": "albert/tiny-v1", "commit": sha}


def test_safetensors_preferred_and_tokenizer_json_repository(fake_hub, spm_tokenizer, tmp_path):
    """albert-base-v2's layout: both weight formats (only model.safetensors is downloaded, as transformers
    prefers it) and tokenizer.json + spiece.model; a tokenizer option downloads the tokenizer files only."""
    model = _hf_albert(load_tokenizer(spm_tokenizer).vocab_size, seed=1)
    model.save_pretrained(tmp_path / "st")
    files = {
        **_bin_files(model, tmp_path),
        "model.safetensors": (tmp_path / "st" / "model.safetensors").read_bytes(),
        **{name: (spm_tokenizer / name).read_bytes() for name in ("spiece.model", "tokenizer.json")},
        "flax_model.msgpack": b"\1" * 64,
    }
    fake_hub.add_repo("albert/tiny-v2", files)
    directory = hub.resolve("albert/tiny-v2")
    assert _snapshot_files(directory) == ["config.json", "model.safetensors", "spiece.model", "tokenizer.json"]
    assert not any(path.endswith(("pytorch_model.bin", ".msgpack")) for _, path in fake_hub.requests)
    _same_outputs(directory, TEXTS, transformers.AutoTokenizer.from_pretrained(directory))

    json_only = {"config.json": files["config.json"], "model.safetensors": files["model.safetensors"]}
    fake_hub.add_repo("org/json-tokenizer", {**json_only, "tokenizer.json": files["tokenizer.json"]})
    tok_dir = hub.resolve("org/json-tokenizer", kind="tokenizer", option="--tokenizer")
    assert _snapshot_files(tok_dir) == ["tokenizer.json"]
    ours = load_tokenizer(tok_dir)
    assert [ours.encode(t) for t in TEXTS] == [load_tokenizer(spm_tokenizer).encode(t) for t in TEXTS]


def test_chinese_vocab_txt_repository_matches_transformers(fake_hub, tmp_path):
    """voidful/albert_chinese_*'s layout: vocab.txt read by BertTokenizer, pytorch_model.bin."""
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [*chars, "the", "a", "##b"]
    model = _hf_albert(len(vocab), seed=2)
    tokenizer_config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True}
    files = {
        **_bin_files(model, tmp_path),
        "vocab.txt": "\n".join(vocab) + "\n",
        "tokenizer_config.json": json.dumps(tokenizer_config),
    }
    fake_hub.add_repo("voidful/albert-chinese-tiny", files)
    directory = hub.resolve("voidful/albert-chinese-tiny")
    assert _snapshot_files(directory) == ["config.json", "pytorch_model.bin", "tokenizer_config.json", "vocab.txt"]
    texts = ["一丁七万丈三上下", "三 the ab 丈"]
    _same_outputs(directory, texts, transformers.BertTokenizer.from_pretrained(directory))


SHARDED = ["model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


@pytest.mark.parametrize(
    ("listing", "chosen"),
    [
        (["model.safetensors", "pytorch_model.bin", "tf_model.h5"], ["model.safetensors"]),
        ([*SHARDED, "pytorch_model.bin", "onnx/model.onnx"], SHARDED),
        (["pytorch_model.bin", "flax_model.msgpack", "rust_model.ot"], ["pytorch_model.bin"]),
        (["config.json", "model.onnx", "spiece.model"], ["model.onnx"]),
        (["tf_model.h5", "onnx/model.onnx"], []),
    ],
)
def test_weights_chosen_in_transformers_order(listing, chosen):
    assert hub.select_weights(listing) == chosen


@pytest.fixture
def tiny_repo(fake_hub, spm_tokenizer, tmp_path):
    """A litebert-written model repository at two revisions: main and v1 (other weights)."""
    files = {}
    for revision, seed in (("main", 0), ("v1", 1)):
        model = _hf_albert(load_tokenizer(spm_tokenizer).vocab_size, seed=seed)
        model.save_pretrained(tmp_path / revision)
        files[revision] = {p.name: p.read_bytes() for p in (tmp_path / revision).iterdir()}
        files[revision].update({n: (spm_tokenizer / n).read_bytes() for n in ("spiece.model", "tokenizer.json")})
    shas = {revision: fake_hub.add_repo("org/tiny", files[revision], revision=revision) for revision in files}
    return shas


def test_revisions_and_offline_cache(fake_hub, tiny_repo):
    main_dir, v1_dir = hub.resolve("org/tiny"), hub.resolve("org/tiny", "v1")
    assert (main_dir.name, v1_dir.name) == (tiny_repo["main"], tiny_repo["v1"])
    assert hub.resolve("org/tiny", tiny_repo["v1"]) == v1_dir  # a commit sha
    a, b = (AlbertForMaskedLM.from_pretrained(d).albert.embeddings.word_embeddings.weight for d in (main_dir, v1_dir))
    assert not torch.equal(a, b)

    served = len(fake_hub.requests)
    fake_hub.go_offline()
    assert hub.resolve("org/tiny") == main_dir and hub.resolve("org/tiny", "v1") == v1_dir
    assert len(fake_hub.requests) == served  # from the cache, nothing asked
    with pytest.raises(
        LitebertError,
        match=r"--model org/never: no local directory org/never; as a Hub id: HF_HUB_OFFLINE is set and the files are not in",
    ):
        hub.resolve("org/never")


def test_unreachable_hub_uses_the_cache(fake_hub, tiny_repo, monkeypatch):
    import huggingface_hub.constants as hc

    directory = hub.resolve("org/tiny")
    fake_hub.stop()  # the Hub goes away: the cached snapshot still resolves, an uncached one is a clear error
    assert hub.resolve("org/tiny") == directory
    with pytest.raises(LitebertError, match="the Hub could not be reached and the files are not in the Hub cache"):
        hub.resolve("org/tiny", "v1")
    assert not hc.HF_HUB_OFFLINE


@pytest.mark.parametrize(
    ("name", "revision", "message"),
    [
        ("org/nothing", None, r"--model org/nothing: no local directory org/nothing, and no Hub repository"),
        ("org/tiny", "v9", r"--model org/tiny --revision v9: the Hub repository org/tiny has no branch, tag or commit"),
        ("org/gated", None, r"--model org/gated: gated repository; ask for access .* set HF_TOKEN"),
        ("org/private", None, r"no Hub repository org/private \(a private one needs HF_TOKEN\)"),
        ("no/such/dir", None, r"--model no/such/dir: no such file or directory \(and not a Hub id ORG/NAME\)"),
        ("org/data-only", None, r"--model org/data-only: the Hub repository holds no config.json: not a model"),
        ("org/no-weights", None, r"holds no weights \(model.safetensors"),
    ],
)
def test_errors_name_the_option_and_the_id(fake_hub, tiny_repo, name, revision, message):
    files = fake_hub.repos["model", "org/tiny"].files()
    fake_hub.add_repo("org/gated", files, gated=True)
    fake_hub.add_repo("org/private", files, private=True)
    fake_hub.add_repo("org/data-only", {"train.csv": b"a,b\n"})
    fake_hub.add_repo("org/no-weights", {"config.json": files["config.json"], "spiece.model": files["spiece.model"]})
    with pytest.raises(LitebertError, match=message):
        hub.resolve(name, revision)


def test_gated_and_private_with_token(fake_hub, tiny_repo, monkeypatch):
    files = fake_hub.repos["model", "org/tiny"].files()
    fake_hub.add_repo("org/gated", files, gated=True)
    fake_hub.add_repo("org/private", files, private=True)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    for repo_id in ("org/gated", "org/private"):
        assert (hub.resolve(repo_id) / "model.safetensors").read_bytes() == files["model.safetensors"]


def test_local_path_wins(fake_hub, tiny_repo, tmp_path, monkeypatch):
    local = tmp_path / "org" / "tiny"
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    served = len(fake_hub.requests)
    assert hub.resolve("org/tiny") == Path("org/tiny") and len(fake_hub.requests) == served


def test_recorded_snapshot_path_from_another_cache_downloads_that_commit(fake_hub, tiny_repo):
    foreign = f"/elsewhere/hub/models--org--tiny/snapshots/{tiny_repo['v1']}"
    assert hub.resolve(foreign).name == tiny_repo["v1"]


def _cli_error(capsys) -> str:
    return capsys.readouterr().err


def test_cli_info_export_and_finetune_take_hub_ids(fake_hub, tiny_repo, tmp_path, capsys, caplog):
    assert main(["info", "org/tiny", "--revision", "v1"]) == 0
    assert "albert" in capsys.readouterr().out.lower()
    assert main(["export", "org/tiny", "--output", str(tmp_path / "exported")]) == 0
    assert (tmp_path / "exported" / "model.safetensors").is_file()

    train = tmp_path / "train.tsv"
    rows = ["sentence\tlabel"] + [f"{t}\t{i % 2}" for i, t in enumerate(TEXTS * 6)]
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    data = ["--train", str(train), "--dev", str(train), "--text-column", "sentence", "--label-column", "label"]
    argv = ["finetune", "--model", "org/tiny", "--revision", "v1", *data]
    argv += ["--output", str(out), "--max-steps", "2", "--batch-size", "4", "--max-seq-length", "16", "--no-progress"]
    assert main(argv) == 0
    settings = json.loads((out / "run_settings.json").read_text())
    assert settings["hub"] == {"model": {"repo_id": "org/tiny", "commit": tiny_repo["v1"], "revision": "v1"}}
    assert settings["finetune_config"]["model"].endswith(f"models--org--tiny/snapshots/{tiny_repo['v1']}")
    # errors come before any work: no run directory is created
    bad = tmp_path / "bad"
    for model, extra, message in (
        ("org/tiny", ["--revision", "nope"], "has no branch, tag or commit 'nope'"),
        ("org/absent", [], "no Hub repository org/absent"),
    ):
        args = ["finetune", "--model", model, *extra, *data]
        assert main([*args, "--output", str(bad)]) == 2
        assert message in _cli_error(capsys) and not bad.exists()
    with caplog.at_level("WARNING", logger="litebert.hub"):  # a local model: --revision is said to be ignored
        assert main(["info", str(tmp_path / "exported"), "--revision", "v1"]) == 0

    # the recorded settings reproduce the run: read back with --config (offline now), the same snapshot
    fake_hub.go_offline()
    assert main(["finetune", "--config", str(out / "run_settings.json"), "--output", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "run_settings.json").read_text())["hub"] == settings["hub"]


# ------------------------------------------------------------------------------------------------------- push
@pytest.fixture
def model_dir(spm_tokenizer, tmp_path) -> Path:
    """A model directory to share: transformers-format weights + config, the tokenizer files, a card."""
    d = tmp_path / "best"
    _hf_albert(load_tokenizer(spm_tokenizer).vocab_size, seed=3).save_pretrained(d)
    for name in ("spiece.model", "tokenizer.json", "tokenizer_config.json"):
        (d / name).write_bytes((spm_tokenizer / name).read_bytes())
    (d / "README.md").write_text("---\nlicense: apache-2.0\ntags:\n- albert\n- litebert\n---\n# best\n")
    return d


def test_push_uploads_through_the_commit_api_and_loads_back(fake_hub, model_dir, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    assert main(["push", str(model_dir), "--repo-id", "me/tiny-sst2"]) == 0
    assert "pushed 6 files to me/tiny-sst2@main" in capsys.readouterr().out
    repo = fake_hub.repos["model", "me/tiny-sst2"]
    assert not repo.private
    for p in model_dir.iterdir():
        assert repo.files("main")[p.name] == p.read_bytes(), p.name

    back = hub.resolve("me/tiny-sst2")  # download it back: the same model, the same outputs as the source
    ours, src = AlbertForMaskedLM.from_pretrained(back), AlbertForMaskedLM.from_pretrained(model_dir)
    x = torch.tensor([load_tokenizer(back).encode(TEXTS[0], add_special_tokens=True)])
    with torch.no_grad():
        torch.testing.assert_close(ours(x).logits, src(x).logits, rtol=0, atol=0)

    # a second push to a new branch of the existing repository, and a private repository
    (model_dir / "README.md").write_text("---\nlicense: apache-2.0\n---\n# v2\n")
    result = hub.push_model(model_dir, "me/tiny-sst2", revision="v2")
    assert result.revision == "v2" and repo.resolve("v2") == result.commit
    assert repo.files("v2")["README.md"] == b"---\nlicense: apache-2.0\n---\n# v2\n"
    assert repo.files("main")["README.md"] != repo.files("v2")["README.md"]
    hub.push_model(model_dir, "me/secret", private=True)
    assert fake_hub.repos["model", "me/secret"].private


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: (d / "optimizer.pt").write_bytes(b"x"), "a training checkpoint"),
        (lambda d: (d / "model.safetensors").unlink(), "not a model directory"),
        (lambda d: (d / "config.json").unlink(), "not a model directory"),
        (lambda d: [(d / n).unlink() for n in ("spiece.model", "tokenizer.json")], "no tokenizer"),
    ],
)
def test_push_refuses_before_uploading(fake_hub, model_dir, monkeypatch, capsys, make, message):
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    make(model_dir)
    assert main(["push", str(model_dir), "--repo-id", "me/x"]) == 2
    assert message in capsys.readouterr().err
    assert fake_hub.requests == []  # nothing was sent


def test_push_errors(fake_hub, model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "best" / "config.json").write_text("{}")
    with pytest.raises(LitebertError, match=r"not a model directory .*did you mean .*run/best\?"):
        hub.push_model(run, "me/x")
    with pytest.raises(LitebertError, match="--repo-id not-an-id: expected a Hub id ORG/NAME"):
        hub.push_model(model_dir, "not-an-id")
    assert main(["push", str(model_dir), "--repo-id", "me/x"]) == 2  # no token
    assert "push to me/x: not logged in or the token is invalid: set HF_TOKEN" in capsys.readouterr().err
    assert ("model", "me/x") not in fake_hub.repos


def test_push_without_the_hub_is_one_error_line(fake_hub, model_dir, monkeypatch, capsys):
    """No network (a refused connection) or HF_HUB_OFFLINE: one `error:` line naming the repository (and the
    endpoint), not huggingface_hub's traceback."""
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_TOKEN", fake_hub.token)
    monkeypatch.setattr(hc, "ENDPOINT", "http://127.0.0.1:1")  # nothing listens there: connection refused
    assert main(["push", str(model_dir), "--repo-id", "me/sst2-test"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: push to me/sst2-test: the Hub (http://127.0.0.1:1"), err
    assert "could not be reached for me/sst2-test: ConnectError" in err[0]
    fake_hub.go_offline()
    assert main(["push", str(model_dir), "--repo-id", "me/sst2-test"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: push to me/sst2-test: HF_HUB_OFFLINE is set, so the Hub repository me/sst2-test cannot be reached; "
        "unset it (with network access) to talk to the Hub"
    ]
    assert fake_hub.requests == []


@pytest.mark.parametrize("command", ["finetune", "pretrain", None])
def test_push_of_a_checkpoint_advises_what_works_for_its_run(fake_hub, model_dir, tmp_path, capsys, command):
    """A fine-tuning checkpoint: push RUN/best (`litebert export` refuses fine-tuning checkpoints); a pretraining
    one: `litebert export CKPT`, or RUN/final; a checkpoint of an unknown run: both."""
    run = tmp_path / "runs" / "sst2"
    ckpt = run / "checkpoints" / "step-13"
    ckpt.mkdir(parents=True)
    for name in ("COMPLETE", "trainer_state.json", "optimizer.pt", "model.safetensors", "config.json"):
        (ckpt / name).write_bytes(b"{}")
    if command is not None:
        (run / "run_settings.json").write_text(json.dumps({"command": command}))
    target = run / ("best" if command == "finetune" else "final")
    shutil.copytree(model_dir, target)
    assert main(["push", str(ckpt), "--repo-id", "me/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: push {ckpt}: a training checkpoint"), err
    if command == "finetune":
        assert err[0].endswith(
            f"push the fine-tuning run's best model, {run / 'best'} (`litebert export` takes pretraining "
            "checkpoints only)"
        )
        assert "--output DIR" not in err[0]
    elif command == "pretrain":
        assert f"`litebert export {ckpt} --output DIR` and push DIR, or push the run's {run / 'final'}" in err[0]
    else:
        assert "best/ (fine-tuning) or final/ (pretraining)" in err[0] and f"litebert export {ckpt}" in err[0]
    assert hub.check_pushable(target)  # what it points at can be pushed
    assert fake_hub.requests == []


def test_every_option_that_reads_a_model_or_tokenizer_says_it_takes_a_hub_id():
    """--model, --tokenizer, --init-from (hub.HUB_FIELDS) and the model argument of export/info, in every command:
    the metavar shows DIR|ORG/NAME (or its kind|ORG/NAME), the help says "Hub id ORG/NAME", and the command has
    --revision."""
    import argparse

    from litebert.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = {}
    for command, parser in commands.items():
        for action in parser._actions:
            reads = action.dest in hub.HUB_FIELDS or (command, action.dest) in {
                ("export", "checkpoint"),
                ("info", "path"),
            }
            if not reads:
                continue
            found.setdefault(command, []).append(action.dest)
            assert str(action.metavar).endswith("|ORG/NAME"), (command, action.dest, action.metavar)
            assert "Hub id ORG/NAME" in " ".join(action.help.split()), (command, action.dest, action.help)
            assert any("--revision" in a.option_strings for a in parser._actions), command
    assert found == {
        "prepare": ["tokenizer"],
        "pretrain": ["init_from"],
        "export": ["checkpoint"],
        "finetune": ["model", "tokenizer"],
        "evaluate": ["model", "tokenizer"],
        "predict": ["model", "tokenizer"],
        "info": ["path"],
        "ablate": ["tokenizer"],
    }


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (401, "not logged in or the token is invalid"),
        (403, "the token may not do this"),
        (409, "the Hub refused a conflicting change"),
        (500, "the Hub answered"),
    ],
)
def test_hub_errors_maps_http_statuses(status, why):
    """The HTTP errors the fake Hub does not produce (409, 403 on a write): huggingface_hub's own exception, with a
    real response of that status, through the one mapper."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    response = httpx2.Response(status, request=httpx2.Request("POST", "http://127.0.0.1:1/api/me/x/commit/main"))
    with pytest.raises(LitebertError) as raised, hub.hub_errors("push to me/x", "me/x"):
        raise HfHubHTTPError(f"{status} Client Error: conflict", response=response)
    assert str(raised.value).startswith(f"push to me/x: {why}") and "\n" not in str(raised.value)
