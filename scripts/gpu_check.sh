#!/usr/bin/env bash
# The README's GPU checks, each bounded in time, in the order that gets figures first:
#   the training-step benchmark (eager), the wmt-news-base pipeline profile (eager, bf16 autocast)
#   stopped by SIGINT at its limit (it saves the step it is on and prints how to resume), its
#   evaluation (checkpoint averaging, beam search, BLEU on newstest2013), two diagnostic runs of
#   the profile (float32; the paper's 4000 warm-up steps), then both again with torch.compile.
# Usage: scripts/gpu_check.sh OUT_DIR   (logs and CSVs, named as in results/gpu-check/record.json)
set -u
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
gpu_env "$out/env.txt" "$py"
train() {   # train LOG SECONDS RUN [ARGS...]: the pipeline profile into runs/RUN, its CSV logs kept
    local name=$1 limit=$2 run=runs/$3; shift 3
    step "$name" "$limit" INT $py -m transformer.train --profile wmt-news-base --out "$run" \
        --no-progress "$@"
    cp "$run/train_log.csv" "$out/${name}_log.csv" 2>>"$out/env.txt"
    [ "$name" = train ] && cp "$run/dev_log.csv" "$out/dev_log.csv" 2>>"$out/env.txt"
}
step benchmark 110 TERM $py benchmarks/gpu_step.py --presets base --steps 10 --no-compile
train train 150 gpu-eager
n=$(ls runs/gpu-eager/checkpoints/*.pt 2>/dev/null | wc -l)    # a short run may have fewer than 5
step evaluate 70 TERM $py -m transformer.evaluate runs/gpu-eager --split dev \
    --average $(( n < 5 ? (n > 0 ? n : 1) : 5 ))
train train_fp32 60 fp32 --no-amp
train train_warmup4000 60 w4000 --set warmup_steps=4000
step benchmark_compile 180 TERM $py benchmarks/gpu_step.py --presets base --steps 10
train train_compile 200 gpu-check --compile
