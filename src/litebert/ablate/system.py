"""The ``system`` study's other arm: transformers' ``AlbertForMaskedLM`` trained by ``transformers.Trainer``.

The obvious alternative to ``litebert pretrain``: the same text (the study's training files), the same tokenizer and
model configuration, ``DataCollatorForLanguageModeling`` (token-level masking at the same ``masked_lm_prob``, 80/10/10)
over the documents cut into ``max_seq_length`` blocks (``[CLS] ... [SEP]``, no sentence pairs: the collator has no
sentence task), the same optimizer family (AdamW), peak learning rate, warmup, batch size and step budget or
wall-clock limit. The trained model is saved as a transformers directory and evaluated by litebert's
:func:`litebert.ablate.run.evaluate_model` like every other cell (its sentence head is untrained: chance).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch


class _Blocks(torch.utils.data.Dataset):
    def __init__(self, blocks: list[list[int]]) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.blocks[i]}


def corpus_blocks(files: list[str], tokenizer_dir: str, max_seq_length: int) -> list[list[int]]:
    """Every document of ``files`` (litebert's corpus reader) tokenized and cut into ``[CLS] x [SEP]`` blocks of at most
    ``max_seq_length`` ids (the tail of a document makes a shorter block)."""
    from litebert.corpus import read_documents
    from litebert.tokenization import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    width = max_seq_length - 2
    blocks = []
    for doc in read_documents(files):
        ids: list[int] = []
        for sentence in doc:
            ids.extend(tok.encode(sentence))
        for i in range(0, len(ids), width):
            chunk = ids[i : i + width]
            if len(chunk) >= 2:
                blocks.append([tok.cls_token_id, *chunk, tok.sep_token_id])
    return blocks


def train_transformers(
    model_config,
    files: list[str],
    tokenizer_dir: str,
    out: Path,
    max_steps: int,
    cfg,
    seed: int,
    max_minutes: float | None = None,
) -> dict:
    """Train ``transformers.AlbertForMaskedLM(model_config)`` with ``Trainer``; saves ``out/final``.

    Returns ``{"steps", "seconds", "tokens", "sequences", "blocks"}``: optimizer steps done, training seconds,
    non-padding tokens fed (sum of the block lengths of the batches drawn, estimated from the mean block length).
    """
    import transformers
    from transformers import (
        AlbertForMaskedLM,
        DataCollatorForLanguageModeling,
        PreTrainedTokenizerFast,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    blocks = corpus_blocks(files, tokenizer_dir, cfg.max_seq_length)
    hf_tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    keys = set(transformers.AlbertConfig().to_dict())
    hf_config = transformers.AlbertConfig(
        **{k: v for k, v in model_config.to_dict().items() if k in keys and k not in ("model_type", "architectures")}
    )
    torch.manual_seed(seed)
    model = AlbertForMaskedLM(hf_config)
    collator = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=cfg.masked_lm_prob)

    class _TimeLimit(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if max_minutes is not None and time.perf_counter() - self.t0 >= 60.0 * max_minutes:
                control.should_training_stop = True
            return control

    args = TrainingArguments(
        output_dir=str(out / "hf-trainer"),
        max_steps=max_steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        warmup_steps=int(cfg.warmup_ratio * max_steps),
        weight_decay=0.01,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
        lr_scheduler_type="linear",
        logging_steps=50,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=not cfg.progress_bar,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=_Blocks(blocks), data_collator=collator, callbacks=[_TimeLimit()]
    )
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    steps = trainer.state.global_step
    trainer.save_model(str(out / "final"))
    mean_len = sum(len(b) for b in blocks) / max(len(blocks), 1)
    return {
        "steps": steps,
        "seconds": seconds,
        "tokens": round(steps * cfg.batch_size * mean_len),
        "sequences": steps * cfg.batch_size,
        "blocks": len(blocks),
        "transformers": transformers.__version__,
    }
