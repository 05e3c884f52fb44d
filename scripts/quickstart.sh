#!/usr/bin/env bash
# litebert's main job in one command: pretrain a small ALBERT on WikiText-2 and ask it to fill a mask.
#
#   scripts/quickstart.sh [OUTPUT]            (default OUTPUT: runs/quickstart)
#
# 1. tokenizer   SentencePiece (ALBERT's own, unigram), 8000 ids, trained on wiki.train.tokens
# 2. prepare     SOP pairs + n-gram masking shards of train and valid (30 % of tokens masked), at 64 tokens and
#                at 128 tokens
# 3. pretrain    scripts/quickstart_model.json (E64 H128, 4 heads, 4 layers sharing one group, initializer_range
#                0.05) with AdamW, 6000 steps of 4096 tokens in two phases, as BERT (Devlin et al. 2019, A.2):
#                3a. 5400 steps x 64 sequences of <= 64 tokens, peak lr 2e-3 -> OUTPUT/pretrain-seq64/
#                3b. 600 steps x 32 sequences of <= 128 tokens from 3a's model, peak lr 5e-4 -> OUTPUT/pretrain/
#                Phase 3b trains the position vectors 64-127, which 3a never reaches: without it every token
#                past the 64th of a fine-tuning input (57 % of MRPC's pairs, at finetune's default
#                --max-seq-length 128) would enter the encoder with a random position vector.
# 4. plot        OUTPUT/pretrain-seq64/curves.png, OUTPUT/pretrain/curves.png
# 5. fill-mask   transformers.pipeline("fill-mask", model=OUTPUT/pretrain/final)
#
# WikiText-2 is read from $LITEBERT_DATA_DIR/wikitext-2 (default ../shared/data beside the repository); when it is
# not there it is downloaded with `datasets` (pip install 'litebert[hub]'). Each stage is skipped when its output
# exists, and pretraining resumes from its newest checkpoint (--resume auto), so an interrupted run can be
# restarted with the same command. QS_STEPS=300 gives a short smoke run. Knobs (environment): QS_STEPS (6000, both
# phases), QS_LONG_STEPS (10 % of QS_STEPS), QS_BATCH (64), QS_SEQ (64), QS_LONG_SEQ (128), QS_MASK_PROB (0.3),
# QS_MAX_PRED (20 at 64 tokens, scaled with the length), QS_OPTIMIZER (adamw), QS_LR (2e-3), QS_LONG_LR (5e-4),
# QS_WARMUP (10 % of phase 1), QS_VOCAB (8000), QS_MODEL (scripts/quickstart_model.json), QS_WORKERS (2),
# QS_THREADS (2), QS_PRECISION (auto: bf16 autocast where the CPU/GPU computes bf16 natively, else fp32),
# QS_COMPILE_MODE (unset: eager; e.g. reduce-overhead: both phases with --static-shapes --compile-mode MODE, CUDA
# graphs on a GPU, where a model this small is otherwise bound by kernel launches; docs/gpu.md), QS_CUDA_GRAPHS (1:
# both phases with --cuda-graphs, the whole step captured as one CUDA graph and replayed, no compilation; a GPU).
# QS_PYCACHE (auto: where torch's modules carry no bytecode, as in some container images that also set
# PYTHONDONTWRITEBYTECODE, each of the job's Python processes would compile the modules it imports anew, about 8 s a
# process measured on one; then PYTHONPYCACHEPREFIX=OUTPUT/.pycache and bytecode writing on, the packages compiled
# there in the background, on all cores, while the tokenizer and the shards are made (those import no torch); 1:
# always; 0: never).
#
# Why this recipe (docs/pretraining.md, "Why this recipe"): a model this small sits for thousands of steps on the
# context-free MLM plateau (about 15 % accuracy: copy the visible token or guess by frequency). 64-token sequences,
# 4 heads, 30 % masking and initializer_range 0.05 each shorten that; the 64-token phase leaves it by step 2000.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-runs/quickstart}"
DATA_DIR="${LITEBERT_DATA_DIR:-$REPO/../shared/data}"
STEPS="${QS_STEPS:-6000}"
LONG_STEPS="${QS_LONG_STEPS:-$(( STEPS / 10 ))}"  # phase 3b: 600 by default
SHORT_STEPS=$(( STEPS - LONG_STEPS ))               # phase 3a: 5400 by default
BATCH="${QS_BATCH:-64}"
SEQ="${QS_SEQ:-64}"
LONG_SEQ="${QS_LONG_SEQ:-128}"
LONG_BATCH=$(( BATCH * SEQ / LONG_SEQ ))            # the same tokens per step: 32 x 128 = 64 x 64
OPTIMIZER="${QS_OPTIMIZER:-adamw}"
LR="${QS_LR:-2e-3}"
LONG_LR="${QS_LONG_LR:-5e-4}"
WARMUP="${QS_WARMUP:-$(( SHORT_STEPS / 10 ))}"  # 10 % of phase 3a: 540 by default
MASK_PROB="${QS_MASK_PROB:-0.3}"
MAX_PRED="${QS_MAX_PRED:-$(( SEQ * 20 / 64 ))}"  # room for MASK_PROB x SEQ targets: 20 at 64 tokens
LONG_MAX_PRED=$(( MAX_PRED * LONG_SEQ / SEQ ))   # 40 at 128 tokens
VOCAB="${QS_VOCAB:-8000}"
MODEL="${QS_MODEL:-$REPO/scripts/quickstart_model.json}"
WORKERS="${QS_WORKERS:-2}"
PRECISION="${QS_PRECISION:-auto}"
PY="${PYTHON:-python}"
COMPILE=()
if [[ -n "${QS_COMPILE_MODE:-}" ]]; then COMPILE=(--static-shapes --compile-mode "$QS_COMPILE_MODE"); fi
if [[ "${QS_CUDA_GRAPHS:-0}" == 1 ]]; then COMPILE+=(--cuda-graphs); fi
# Two intra-op threads for a quiet 2-core machine. On a busy or shared CPU use QS_THREADS=1: OpenMP threads spinning
# against other processes cost far more than they bring (measured here: ~10x slower with 2 threads on 2 busy cores).
export OMP_NUM_THREADS="${QS_THREADS:-${OMP_NUM_THREADS:-2}}"
litebert() { "$PY" -m litebert "$@"; }
# the last step (fill-mask) runs transformers' pipeline: say so now, not after half an hour of pretraining
if ! "$PY" -c "import transformers" 2>/dev/null; then
  echo "error: the quick start ends with transformers' fill-mask pipeline, and transformers is not installed:" \
    "pip install -e '.[test,hub]' (or pip install transformers)" >&2
  exit 1
fi

mkdir -p "$OUT"
START=$(date +%s)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # a failed stage leaves no prepare or compileall running
PRECOMPILE=""
case "${QS_PYCACHE:-auto}" in
  1) PYCACHE=1 ;;
  0) PYCACHE=0 ;;
  *) PYCACHE=0
     if [[ -z "${PYTHONPYCACHEPREFIX:-}" ]] && ! "$PY" -c 'import importlib.util as u, os, sys
sys.exit(0 if os.path.exists(u.cache_from_source(u.find_spec("torch").origin)) else 1)' 2>/dev/null; then PYCACHE=1; fi ;;
esac
if [[ "$PYCACHE" == 1 ]]; then
  # one compiled copy of the packages' modules for all the job's processes, written under OUTPUT only
  export PYTHONPYCACHEPREFIX="$(cd "$OUT" && pwd)/.pycache"
  unset PYTHONDONTWRITEBYTECODE
  "$PY" - "$REPO/src" >/dev/null 2>&1 <<'EOF' &
import compileall, importlib.util as u, os, sys
dirs = [sys.argv[1]]
for n in ("torch", "transformers", "numpy", "safetensors", "tensorboard", "matplotlib", "tokenizers", "sentencepiece",
          "tqdm", "huggingface_hub", "PIL"):
    s = u.find_spec(n)
    if s is not None and s.origin:
        dirs.append(os.path.dirname(s.origin))
for d in dirs:
    compileall.compile_dir(d, quiet=1, workers=0)
EOF
  PRECOMPILE=$!
fi
WT="$DATA_DIR/wikitext-2"
if [[ ! -f "$WT/wiki.train.tokens" || ! -f "$WT/wiki.valid.tokens" ]]; then
  WT="$OUT/wikitext-2"
  if [[ ! -f "$WT/wiki.train.tokens" ]]; then
    echo "== WikiText-2 not found under $DATA_DIR; downloading it with datasets into $WT"
    "$PY" - "$WT" <<'EOF'
import sys
from pathlib import Path
try:
    from datasets import load_dataset
except ImportError:
    sys.exit("error: WikiText-2 is not on disk and `datasets` is not installed: pip install 'litebert[hub]' "
             "or set LITEBERT_DATA_DIR to a directory holding wikitext-2/wiki.{train,valid}.tokens")
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
ds = load_dataset("wikitext", "wikitext-2-v1")
for split, name in (("train", "wiki.train.tokens"), ("validation", "wiki.valid.tokens")):
    (out / name).write_text("".join(ds[split]["text"]), encoding="utf-8")
EOF
  fi
fi

echo "== 1/5 tokenizer ($VOCAB ids) from $WT/wiki.train.tokens"
if [[ -f "$OUT/tokenizer/spiece.model" ]]; then
  echo "   $OUT/tokenizer exists: kept"
else
  litebert train-tokenizer --corpus "$WT/wiki.train.tokens" --kind sentencepiece --vocab-size "$VOCAB" \
    --output "$OUT/tokenizer"
fi

echo "== 2/5 prepare train and valid shards ($SEQ and $LONG_SEQ tokens)"
# the four are independent: side by side (no progress bars) where the machine has cores for all (4 x QS_WORKERS)
SIDE_BY_SIDE=0
if (( $(nproc 2>/dev/null || echo 1) >= 4 * WORKERS )); then SIDE_BY_SIDE=1; fi
PREPARING=()
for split in train valid; do
  for spec in "$split:$SEQ:$MAX_PRED" "$split-$LONG_SEQ:$LONG_SEQ:$LONG_MAX_PRED"; do
    IFS=: read -r name seq max_pred <<<"$spec"
    if [[ -f "$OUT/data/$name/manifest.json" ]]; then echo "   $OUT/data/$name exists: kept"; continue; fi
    args=(prepare --corpus "$WT/wiki.$split.tokens" --tokenizer "$OUT/tokenizer" --output "$OUT/data/$name"
          --max-seq-length "$seq" --max-predictions-per-seq "$max_pred" --masked-lm-prob "$MASK_PROB"
          --workers "$WORKERS" --seed 12345)
    if [[ "$SIDE_BY_SIDE" == 1 ]]; then
      litebert "${args[@]}" --no-progress &
      PREPARING+=("$!:$OUT/data/$name")
    else
      litebert "${args[@]}"
    fi
  done
done
for job in ${PREPARING[@]+"${PREPARING[@]}"}; do
  wait "${job%%:*}"  # a failed prepare stops the job here (set -e)
  echo "   ${job#*:}"
done

if [[ -n "$PRECOMPILE" ]]; then wait "$PRECOMPILE" || true; fi  # the bytecode of torch & co., compiled since the start
echo "== 3/5 pretrain $MODEL, phase a: $SHORT_STEPS steps x $BATCH sequences of <= $SEQ tokens, $OPTIMIZER peak lr $LR, warmup $WARMUP"
litebert pretrain --data "$OUT/data/train" --eval-data "$OUT/data/valid" --model-config "$MODEL" \
  --output "$OUT/pretrain-seq$SEQ" --optimizer "$OPTIMIZER" --learning-rate "$LR" --warmup-steps "$WARMUP" \
  --max-steps "$SHORT_STEPS" --batch-size "$BATCH" --logging-steps 50 --eval-steps 1000 --max-eval-batches 40 \
  --save-steps 1000 --save-total-limit 2 --seed 42 --resume auto --precision "$PRECISION" ${COMPILE[@]+"${COMPILE[@]}"}
echo "== 3/5 pretrain, phase b: $LONG_STEPS steps x $LONG_BATCH sequences of <= $LONG_SEQ tokens from phase a's model, peak lr $LONG_LR"
litebert pretrain --data "$OUT/data/train-$LONG_SEQ" --eval-data "$OUT/data/valid-$LONG_SEQ" \
  --model-config "$OUT/pretrain-seq$SEQ/final/config.json" --init-from "$OUT/pretrain-seq$SEQ/final" \
  --output "$OUT/pretrain" --optimizer "$OPTIMIZER" --learning-rate "$LONG_LR" \
  --warmup-steps "$(( LONG_STEPS / 10 ))" --max-steps "$LONG_STEPS" --batch-size "$LONG_BATCH" --logging-steps 50 \
  --eval-steps "$LONG_STEPS" --max-eval-batches 80 --save-steps "$LONG_STEPS" --save-total-limit 1 --seed 43 \
  --resume auto --precision "$PRECISION" ${COMPILE[@]+"${COMPILE[@]}"}

echo "== 4/5 curves"
litebert plot "$OUT/pretrain-seq$SEQ"
litebert plot "$OUT/pretrain"

echo "== 5/5 fill-mask with transformers"
"$PY" - "$OUT/pretrain/final" <<'EOF'
import sys
import warnings

warnings.filterwarnings("ignore")
from transformers import pipeline
from transformers.utils import logging

logging.set_verbosity_error()
fill = pipeline("fill-mask", model=sys.argv[1])
for text in ("The film was released in the United [MASK] in 2010 .",
             "He played [MASK] for the club until 1995 ."):
    text = text.replace("[MASK]", fill.tokenizer.mask_token)
    guesses = ", ".join(f"{p['token_str']!r} {p['score']:.2f}" for p in fill(text, top_k=5))
    print(f"{text}\n    -> {guesses}")
EOF
echo "== done in $(( $(date +%s) - START )) s; model: $OUT/pretrain/final, curves: $OUT/pretrain/curves.png"
