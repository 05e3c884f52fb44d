"""DDP and FSDP (FSDP2, gloo on CPU) against one process: the same weights on the same global batch (with
accumulation and 2 layer groups), resumes within and across modes, MLM-only data, FSDP's collective count per
micro-batch, its mixed-precision policy and mesh, evaluation that drops no batch. One spawn of 2 processes runs
every distributed job (tests/_distributed_helpers.py); each test checks one finding of issue 16."""

from __future__ import annotations

import tempfile

import _distributed_helpers as H
import pytest
import torch
import torch.multiprocessing as mp

from litebert.training import distributed as D

pytestmark = pytest.mark.usefixtures("one_thread")


def _max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """1-process reference runs (in this process), then the 2-process jobs; {name: result}."""
    tmp = tmp_path_factory.mktemp("dist")
    one = D.DistInfo()
    ref = {
        "one": H.run_training(tmp / "one", one, accum=2),
        "one_mlm": H.run_training(tmp / "one_mlm", one, sop=False, steps=2, save_steps=0),
        "eval_one": H.eval_sums(one, fsdp=False),
    }
    store = tempfile.mktemp(prefix="litebert_store_")
    mp.spawn(H.worker, args=(2, store, str(tmp)), nprocs=2, join=True)
    ranks = [torch.load(tmp / f"results.rank{r}.pt", weights_only=False) for r in range(2)]
    # the 2-process jobs need the 1-process checkpoint of step 3 (fsdp_from_one); and back: FSDP's step 3 here
    ref["one_from_fsdp"] = H.run_training(tmp / "one_f", one, resume=H.checkpoint_copy(tmp / "fsdp", 2, tmp / "one_f"))
    return {**ref, **ranks[0], "rank1": ranks[1]}


def test_fsdp_ddp_and_one_process_train_to_the_same_weights(runs):
    # global batch 8: 1 x 4 x 2 accumulation, 2 x 2 x 2 (DDP and FSDP); 4 layers in 2 groups
    assert _max_diff(runs["one"], runs["ddp"]) < 1e-5
    assert _max_diff(runs["one"], runs["fsdp"]) < 1e-5
    assert runs["rank1"]["fsdp"] == {}  # the full state dict is gathered to rank 0 only (rank 0 saves)


def test_resume_is_bit_exact_under_fsdp_and_crosses_modes(runs):
    assert _max_diff(runs["fsdp"], runs["fsdp_resumed"]) == 0
    # checkpoints interchangeable both ways: one layout (optimizer state keyed by parameter name)
    assert _max_diff(runs["ddp"], runs["fsdp_from_ddp"]) < 1e-5
    assert _max_diff(runs["one"], runs["fsdp_from_one"]) < 1e-5  # 1 process -> 2 (FSDP)
    assert _max_diff(runs["fsdp"], runs["one_from_fsdp"]) < 1e-5  # 2 (FSDP) -> 1 process


def test_ddp_and_fsdp_train_on_mlm_only_data(runs):
    # no SOP head in the model (AlbertForMaskedLM): DDP gets a gradient for every parameter
    assert not any(k.startswith(("sop_classifier", "albert.pooler")) for k in runs["ddp_mlm"])
    assert _max_diff(runs["one_mlm"], runs["ddp_mlm"]) < 1e-5
    assert _max_diff(runs["one_mlm"], runs["fsdp_mlm"]) < 1e-5


def test_fsdp_gathers_a_shared_group_once_per_micro_batch(runs):
    shallow, deep = runs["collectives"][2], runs["collectives"][6]
    # units: the root and the one layer group; the group runs its 6 layer uses in one call, so a 3x deeper model
    # needs no more collectives: forward gathers root + group, backward re-gathers the group, one reduce-scatter each
    assert deep == shallow, (shallow, deep)
    assert deep["all_gather"] <= 3 and deep["reduce_scatter"] == 2


def test_fsdp_mixed_precision_policy(runs):
    assert runs["bf16_policy"] and all(p == (torch.bfloat16, torch.float32) for p in runs["bf16_policy"])
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in runs["bf16_weights"].values())
    policy = D.mixed_precision_policy("fp32")
    assert policy.param_dtype is None and policy.reduce_dtype is None  # fp32 everywhere


def test_fsdp_uses_the_cpu_mesh_when_a_gpu_is_visible(runs):
    assert runs["mesh_device"] == "cpu" and runs["mesh_forward_ok"]


def test_compiled_ddp_still_skips_gradient_sync(runs):
    assert runs["compiled_no_sync"]


def test_ranks_draw_their_own_dropout_masks(runs):
    """Defect: every rank seeds alike (for the same initial weights) and kept that stream, so rank 1 drew for its
    rows exactly the dropout masks rank 0 drew for its own (and after a resume from a 1-process checkpoint both
    took its RNG file). Now ranks > 0 get streams of their own: the masks differ, while each is still dropout."""
    for job in ("dropout_fresh", "dropout_from_one"):
        first = [r[job][0] != 0 for r in (runs, runs["rank1"])]  # the SOP head's dropout mask of the first micro-batch
        assert first[0].shape == first[1].shape == (2, H.tiny_config().hidden_size), job
        assert not torch.equal(first[0], first[1]), job
        for mask in first:
            assert 0.2 < mask.float().mean() < 0.8, job  # p = 0.5


def test_fsdp_evaluation_drops_no_batch(runs):
    for key in ("eval_fsdp", "eval_ddp"):
        for metric, value in runs["eval_one"].items():
            assert runs[key][metric] == pytest.approx(value, rel=1e-6, abs=1e-7), (key, metric)
