"""Names imported on first use (litebert/lazy.py): the commands that run no model start without torch, and every
public name still resolves to the object its module defines."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

import litebert
import litebert.data
import litebert.finetune
import litebert.training
from litebert.lazy import lazy_exports


def _fresh_python(code: str) -> dict:
    """Run ``code`` in a new interpreter (this one has torch loaded); it prints one JSON line, returned."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_lazy_name_is_imported_on_first_read_then_kept():
    pkg = types.ModuleType("fake_pkg")
    sys.modules["fake_pkg"] = pkg
    try:
        pkg.__getattr__, pkg.__dir__ = lazy_exports("fake_pkg", {"dumps": "json", "JSONDecoder": "json.decoder"})
        assert "dumps" not in vars(pkg)
        assert pkg.dumps is json.dumps and pkg.JSONDecoder is json.JSONDecoder
        assert vars(pkg)["dumps"] is json.dumps  # kept: the next read does not come back to __getattr__
        assert {"dumps", "JSONDecoder"} <= set(pkg.__dir__())
        with pytest.raises(AttributeError, match="'fake_pkg' has no attribute 'loads'"):
            pkg.__getattr__("loads")
    finally:
        del sys.modules["fake_pkg"]


def test_a_lazy_name_that_is_also_a_submodule_name_is_refused():
    """`litebert.training.pretrain` is the submodule: a lazy function of that name would be shadowed by it as soon
    as anything imported the submodule, so which one a reader got would depend on import order."""
    with pytest.raises(ValueError, match=r"\['pretrain'\] are also submodule names"):
        lazy_exports("litebert.training", {"pretrain": "litebert.training.pretrain"})


@pytest.mark.parametrize("package", [litebert, litebert.data, litebert.finetune, litebert.training])
def test_every_public_name_resolves_to_its_modules_object(package):
    for name in package.__all__:
        value = getattr(package, name)
        module = getattr(value, "__module__", None)
        if module is not None and module.startswith("litebert."):  # classes and functions: defined where exported from
            assert getattr(sys.modules[module], name) is value, (package.__name__, name)
        assert name in dir(package)


def test_import_litebert_imports_no_torch_and_from_pretrained_loads_the_checkpoint_io(tmp_path):
    """`import litebert` and the data/training packages import no torch; a model class imported straight from
    litebert.modeling still saves and loads a model directory (the I/O module is loaded on first use)."""
    code = f"""
import json, sys
import litebert, litebert.data, litebert.training, litebert.training.plot, litebert.data.prepare
no_torch = "torch" not in sys.modules
from litebert.modeling import AlbertForMaskedLM
from litebert.config import AlbertConfig
before = "litebert.checkpoint" in sys.modules
model = AlbertForMaskedLM(AlbertConfig.from_preset("albert-debug"))
model.save_pretrained({str(tmp_path)!r})
again = AlbertForMaskedLM.from_pretrained({str(tmp_path)!r})
same = all((a == b).all().item() for a, b in zip(model.state_dict().values(), again.state_dict().values()))
print(json.dumps({{"no_torch": no_torch, "checkpoint_before": before, "same": same}}))
"""
    assert _fresh_python(code) == {"no_torch": True, "checkpoint_before": False, "same": True}


def test_prepare_train_tokenizer_and_plot_run_without_importing_torch(tiny, tmp_path):
    """The main job's tokenizer, prepare and plot processes (7 of its 12) start in a fraction of a second instead
    of paying torch's import (about 1.2 s each on a 2-core CPU, more with the CUDA build)."""
    corpus = tiny.wikitext_subset(20)
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text(
        "".join(
            json.dumps({"step": s, "split": "train", "loss": 9.0 - s, "mlm_accuracy": 0.1 * s}) + "\n" for s in (1, 2)
        )
    )
    commands = [
        ["train-tokenizer", "--corpus", str(corpus), "--kind", "sentencepiece", "--vocab-size", "800",
         "--output", str(tmp_path / "tok")],
        ["prepare", "--corpus", str(corpus), "--tokenizer", str(tmp_path / "tok"), "--output", str(tmp_path / "data"),
         "--max-seq-length", "64", "--workers", "2", "--no-progress"],
        ["plot", str(tmp_path / "run")],
    ]  # fmt: skip
    code = f"""
import json, sys
from litebert.cli import main
codes = [main(argv) for argv in {commands!r}]
print(json.dumps({{"codes": codes, "torch": "torch" in sys.modules}}))
"""
    assert _fresh_python(code) == {"codes": [0, 0, 0], "torch": False}
    assert (tmp_path / "data" / "manifest.json").is_file() and (tmp_path / "run" / "curves.png").is_file()
