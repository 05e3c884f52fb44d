"""Jobs run by tests/test_training_distributed.py in 2 spawned processes (gloo on CPU): DDP and FSDP trainings on
synthetic data, resumes across modes, FSDP's collective count, mixed-precision policy, mesh and evaluation.
Each job writes its results to ``{tmp}/{job}.rank{r}.pt``; the tests compare them with 1-process runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
from _training_helpers import SyntheticPretrainingData

from litebert import AlbertConfig
from litebert.data import PretrainingCollator
from litebert.optim import build_optimizer, build_scheduler
from litebert.training import TrainingArgs, make_batch_factory, train
from litebert.training import distributed as D
from litebert.training.pretrain import (
    make_pretraining_eval,
    mlm_only_count,
    mlm_only_objective,
    pretraining_count,
    pretraining_model,
    pretraining_objective,
)

GLOBAL_BATCH = 8
collate = PretrainingCollator(pad_token_id=0)
STEPS = 4


def tiny_config(layers: int = 4, groups: int = 2) -> AlbertConfig:
    """albert-debug with 2 layer groups (the hard case for sharding and sharing)."""
    return AlbertConfig.from_preset("albert-debug").replace(num_hidden_layers=layers, num_hidden_groups=groups)


def run_training(
    out,
    dist: D.DistInfo,
    *,
    fsdp: bool = False,
    sop: bool = True,
    steps: int = STEPS,
    save_steps: int = 2,
    resume=None,
    accum: int = 2,
    precision: str = "fp32",
    config=None,
    sop_inputs: list | None = None,
):
    """Train a fresh (seed 0) model on synthetic data with global batch 8 = world × batch × accum; returns the final
    full state dict (on every rank). ``sop_inputs``: gets the SOP classifier's input (B, H) of every forward (after
    the head's dropout, so its zeros are the dropout mask)."""
    torch.manual_seed(0)
    model = pretraining_model(config or tiny_config(), sop)
    if sop_inputs is not None:
        model.sop_classifier.classifier.register_forward_pre_hook(lambda m, args: sop_inputs.append(args[0].detach()))
    wrapped = D.wrap_model(model, dist, fsdp=fsdp, precision=precision)
    opt = build_optimizer(wrapped, "lamb", lr=1e-2, weight_decay=0.01)
    sched = build_scheduler(opt, 2, steps)
    batch = GLOBAL_BATCH // (dist.world_size * accum)
    batches = make_batch_factory(
        SyntheticPretrainingData(n=48), batch, collate, seed=1, rank=dist.rank, world_size=dist.world_size
    )
    objective, count = (pretraining_objective, pretraining_count) if sop else (mlm_only_objective, mlm_only_count)
    args = TrainingArgs(
        output_dir=out,
        max_steps=steps,
        gradient_accumulation_steps=accum,
        logging_steps=1,
        save_steps=save_steps,
        resume=str(resume) if resume else None,
        progress_bar=False,
        precision=precision,
    )
    train(
        wrapped, opt, sched, batches, objective, count, args, dist=dist, extra_state={"global_batch_size": GLOBAL_BATCH}
    )
    from litebert.training.loop import _model_state

    return {k: v.detach().clone().cpu() for k, v in _model_state(wrapped).items()}


def checkpoint_copy(src_run: Path, step: int, dest_run: Path) -> Path:
    """``dest_run`` holding only ``src_run``'s checkpoint of ``step`` (rank 0 copies; all ranks wait)."""
    if D.is_main_rank():
        if dest_run.exists():
            shutil.rmtree(dest_run)
        shutil.copytree(src_run / "checkpoints" / f"step-{step}", dest_run / "checkpoints" / f"step-{step}")
    D.barrier()
    return dest_run / "checkpoints" / f"step-{step}"


def count_collectives(dist: D.DistInfo, layers: int) -> dict[str, int]:
    """All-gathers and reduce-scatters of one FSDP forward + backward of a ``layers``-deep, 1-group model."""
    torch.manual_seed(0)
    model = D.wrap_model(pretraining_model(tiny_config(layers, 1)), dist, fsdp=True)
    batch = collate([SyntheticPretrainingData(n=4)[i] for i in range(4)])
    counts = {"all_gather": 0, "reduce_scatter": 0}
    dist_mod = torch.distributed
    originals = dist_mod.all_gather_single, dist_mod.reduce_scatter_single

    def counted(name, fn):
        def wrapper(*a, **k):
            counts[name] += 1
            return fn(*a, **k)

        return wrapper

    dist_mod.all_gather_single = counted("all_gather", originals[0])
    dist_mod.reduce_scatter_single = counted("reduce_scatter", originals[1])
    try:
        pretraining_objective(model, batch).sums["mlm_loss"].backward()
    finally:
        dist_mod.all_gather_single, dist_mod.reduce_scatter_single = originals
    return counts


def eval_sums(dist: D.DistInfo, fsdp: bool) -> dict[str, float]:
    """The pretraining evaluation over 7 batches of 3 (odd: ranks hold 4 and 3) of a fresh model."""
    torch.manual_seed(0)
    model = D.wrap_model(pretraining_model(tiny_config()), dist, fsdp=fsdp)
    batches = make_batch_factory(
        SyntheticPretrainingData(n=20),
        3,
        collate,
        seed=1,
        shuffle=False,
        drop_last=False,
        rank=dist.rank,
        world_size=dist.world_size,
        equal_per_rank=False,
    )
    model.eval()
    with torch.no_grad():
        return make_pretraining_eval(batches, dist.device)(model)


def worker(rank: int, world: int, store: str, tmp: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    dist = D.DistInfo(rank=rank, world_size=world, local_rank=rank, device=torch.device("cpu"))
    tmp = Path(tmp)
    res: dict = {}
    import time

    t0 = [time.perf_counter()]

    def lap(name):
        if os.environ.get("LITEBERT_TEST_TIMES"):
            print(f"rank {rank} {name}: {time.perf_counter() - t0[0]:.1f} s", flush=True)
        t0[0] = time.perf_counter()

    try:
        # the same global batch in every mode; checkpoints at step 2 to resume from
        res["ddp"] = run_training(tmp / "ddp", dist)
        lap("ddp")
        res["fsdp"] = run_training(tmp / "fsdp", dist, fsdp=True)
        lap("fsdp")
        res["fsdp_resumed"] = run_training(
            tmp / "fsdp_r", dist, fsdp=True, resume=checkpoint_copy(tmp / "fsdp", 2, tmp / "fsdp_r")
        )
        lap("fsdp_resumed")
        res["fsdp_from_ddp"] = run_training(
            tmp / "fsdp_d", dist, fsdp=True, resume=checkpoint_copy(tmp / "ddp", 2, tmp / "fsdp_d")
        )
        lap("fsdp_from_ddp")
        res["fsdp_from_one"] = run_training(
            tmp / "fsdp_1", dist, fsdp=True, resume=checkpoint_copy(tmp / "one", 2, tmp / "fsdp_1")
        )
        lap("fsdp_from_one")
        # MLM-only data: the model has no SOP head, so DDP gets every gradient
        res["ddp_mlm"] = run_training(tmp / "ddp_mlm", dist, sop=False, steps=2, save_steps=0)
        lap("ddp_mlm")
        res["fsdp_mlm"] = run_training(tmp / "fsdp_mlm", dist, fsdp=True, sop=False, steps=2, save_steps=0)
        lap("fsdp_mlm")
        res["collectives"] = {layers: count_collectives(dist, layers) for layers in (2, 6)}
        lap("collectives")
        res["eval_fsdp"] = eval_sums(dist, fsdp=True)
        lap("eval_fsdp")
        res["eval_ddp"] = eval_sums(dist, fsdp=False)
        lap("eval_ddp")
        # dropout under DDP: each rank draws its own masks, fresh and resumed from a 1-process checkpoint
        dropout = tiny_config().replace(classifier_dropout_prob=0.5)
        for job, resume in (("dropout_fresh", None), ("dropout_from_one", tmp / "one")):
            res[job] = []
            run_training(
                tmp / job,
                dist,
                steps=3 if resume else 1,
                save_steps=0,
                config=dropout,
                sop_inputs=res[job],
                resume=checkpoint_copy(resume, 2, tmp / job) if resume else None,
            )
        lap("dropout")
        # bf16 policy: bf16 parameters in the forward, fp32 gradient reduction; fp32 weights kept
        policy_model = D.wrap_model(pretraining_model(tiny_config()), dist, fsdp=True, precision="bf16")
        res["bf16_policy"] = [
            (m._get_fsdp_state()._mp_policy.param_dtype, m._get_fsdp_state()._mp_policy.reduce_dtype)
            for m in policy_model.modules()
            if hasattr(m, "_get_fsdp_state")
        ]
        lap("bf16_policy")
        res["bf16_weights"] = run_training(tmp / "fsdp_bf16", dist, fsdp=True, steps=2, save_steps=0, precision="bf16")
        lap("bf16_weights")
        # --fsdp --device cpu on a host with a GPU: the mesh is the CPU one (faked GPU)
        real = torch.cuda.is_available
        torch.cuda.is_available = lambda: True
        try:
            faked = D.wrap_model(pretraining_model(tiny_config()), dist, fsdp=True)
            res["mesh_device"] = next(p for p in faked.parameters()).device_mesh.device_type
            lap("mesh_device")
            loss = pretraining_objective(faked, collate([SyntheticPretrainingData(n=2)[i] for i in range(2)]))
            res["mesh_forward_ok"] = bool(torch.isfinite(loss.sums["mlm_loss"]))
            lap("mesh_forward_ok")
        finally:
            torch.cuda.is_available = real
        # DDP under torch.compile: the compiled wrapper still gets no_sync on accumulation micro-batches
        from litebert.training.loop import _sync_context

        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
        with _sync_context(torch.compile(ddp), sync=False):
            res["compiled_no_sync"] = not ddp.require_backward_grad_sync
            lap("compiled_no_sync")
    finally:
        torch.save(res, tmp / f"results.rank{rank}.pt")
        torch.distributed.destroy_process_group()


def _join_unseen(rank: int, world: int, store: str):
    """A gloo group that the run in this process cannot see until its ``start()`` joins it, and whose join then
    returns at once: what nccl's ``init_process_group`` does (it returns before the other ranks have joined, so one
    rank may run ahead of another); gloo's would wait for every rank. Returns the function that undoes the patches."""
    import datetime

    dist = torch.distributed
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60)
    )
    originals = dist.init_process_group, dist.is_initialized
    joined = [False]
    dist.is_initialized = lambda: joined[0] and originals[1]()
    dist.init_process_group = lambda *a, **k: joined.__setitem__(0, True)

    def restore() -> None:
        dist.init_process_group, dist.is_initialized = originals

    return restore


def verdict_worker(rank: int, world: int, store: str, out: str, run, cfg) -> None:
    """Issue 25: two ranks start one ``run(cfg)`` (``pretrain`` or ``finetune``) into a new --output, rank 1 two
    seconds late, in a process group that each joins when the run's ``start()`` asks (:func:`_join_unseen`: as under
    nccl, rank 0 runs ahead). Writes ``{out}.rank{r}.txt``: "ok" or the error, then how often this rank decided on
    the output directory itself; then the same for a second run into the finished one."""
    from litebert.training import run as R

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    decided = []
    decide = R._check_output_dir
    R._check_output_dir = lambda *a: decided.append(1) or decide(*a)
    lines = []
    for attempt in (1, 2):  # 2: again into the finished run: refused alike on both ranks, rank 0's verdict
        restore = _join_unseen(rank, world, f"{store}.{attempt}")
        if rank == 1:
            import time

            time.sleep(2.0)
        try:
            run(cfg)
            lines.append("ok")
        except Exception as exc:  # every failure is the finding of the test
            lines.append(f"{type(exc).__name__}: {exc}")
        restore()
        if torch.distributed.is_initialized():  # a run that failed before start(): leave the group for the next one
            torch.distributed.destroy_process_group()
        lines.append(f"decided {len(decided)}")
    Path(f"{out}.rank{rank}.txt").write_text("\n".join(lines))
