#!/usr/bin/env bash
# Fine-tune the task kinds of issue 17 (NER, multiple choice, CLUE classification) once each, with the settings
# docs/finetune.md reports: CoNLL-2003, Weibo NER, C3, TNEWS, OCNLI (its 10k train, its dev), then the OCNLI model
# scored on XNLI-zh dev (a cross-dataset transfer).
#
#   scripts/finetune_kinds.sh EN_MODEL ZH_MODEL OUT [INIT]
#
# EN_MODEL / ZH_MODEL: model directories with config.json and tokenizer files (a pretraining final/, or, for
# INIT=random, any directory of the same architecture: the weights are not read). INIT: pretrained (default) or
# random. Step counts are sized for a busy 2-core CPU (each run a few minutes); LB_TASKS limits the tasks
# (default "conll2003 weibo_ner c3 tnews ocnli").
set -euo pipefail
EN="$1"; ZH="$2"; OUT="$3"; INIT="${4:-pretrained}"
D="${LITEBERT_DATA_DIR:-../shared/data}"
TASKS="${LB_TASKS:-conll2003 weibo_ner c3 tnews ocnli}"
common=(--init "$INIT" --no-progress --no-checkpoints --logging-steps 50 --seed 42)
mkdir -p "$OUT"
for task in $TASKS; do
  case "$task" in
    conll2003) args=(--model "$EN" --task conll2003 --train "$D/conll2003/train.txt" --dev "$D/conll2003/dev.txt"
                     --max-steps 200 --eval-steps 100 --batch-size 32 --learning-rate 1e-3 --max-seq-length 64) ;;
    weibo_ner) args=(--model "$ZH" --task weibo_ner --train "$D/weibo_ner/weiboNER_2nd_conll.train"
                     --dev "$D/weibo_ner/weiboNER_2nd_conll.dev" --max-steps 150 --eval-steps 50 --batch-size 32
                     --learning-rate 1e-3 --max-seq-length 128) ;;
    c3)        args=(--model "$ZH" --task c3 --train "$D/c3/c3-m-train.json" --dev "$D/c3/c3-m-dev.json"
                     --max-steps 60 --eval-steps 60 --batch-size 8 --learning-rate 5e-4 --max-seq-length 96
                     --max-eval-examples 500) ;;
    tnews)     args=(--model "$ZH" --task tnews --train "$D/clue/tnews/train.json" --dev "$D/clue/tnews/dev.json"
                     --max-steps 300 --eval-steps 300 --batch-size 32 --learning-rate 1e-3 --max-seq-length 64) ;;
    ocnli)     args=(--model "$ZH" --task ocnli --train "$D/clue/ocnli/train.10k.json" --dev "$D/clue/ocnli/dev.json"
                     --max-steps 300 --eval-steps 300 --batch-size 32 --learning-rate 1e-3 --max-seq-length 96) ;;
    *) echo "unknown task $task" >&2; exit 2 ;;
  esac
  echo "== $task ($INIT)"
  /usr/bin/time -f "$task wall %e s" litebert finetune "${args[@]}" "${common[@]}" --output "$OUT/$task" \
    > "$OUT/$task.log" 2>&1 || { tail -5 "$OUT/$task.log"; exit 1; }
  tail -1 "$OUT/$task.log"
  if [ "$task" = ocnli ]; then  # cross-dataset transfer: the OCNLI model on XNLI-zh dev, labels as they are
    litebert evaluate --model "$OUT/ocnli/best" --task xnli --data "$D/xnli_zh/dev.tsv" --max-seq-length 96 \
      --output "$OUT/ocnli-on-xnli" > "$OUT/ocnli-on-xnli.log" 2>&1
  fi
done
