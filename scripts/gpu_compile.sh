#!/usr/bin/env bash
# The compiled training step on one GPU, in one call of at most about 9 minutes. Every step is
# bounded by its own time limit; its log goes to OUT_DIR, and env.txt says how each one ended.
# The limits are what the steps took on an H200 (results/gpu-compile): compiling the base step
# takes about three minutes, so one call holds the compiled step of ours alone.
#   1. benchmark, eager: base and big, ours beside torch.nn.Transformer (bf16 autocast)
#   2. benchmark, compiled: base, ours, batches in shape classes (pad_to 8, chapter 5.1),
#      compiled during a warm-up pass, then timed; graphs compiled in each phase; the
#      operations with the most GPU time of their own
#   3. the wmt-news-base profile, eager, with the same shape classes (--set pad_to=8)
#   4. the same profile compiled (--compile), for the minutes left: the same batches, so its
#      loss can be read against the eager run's at the same steps
# then scripts/gpu_compile_record.py writes OUT_DIR/record.json from the logs. Not in one call:
# torch.nn.Transformer compiled, and the big model compiled (each needs a call of its own).
# Usage: scripts/gpu_compile.sh OUT_DIR            (copy OUT_DIR to results/gpu-compile/)
set -u
out=${1:?usage: scripts/gpu_compile.sh OUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
gpu_env "$out/env.txt" "$py"
start=$SECONDS
bench=(benchmarks/gpu_step.py --steps 10)
step bench_eager 150 TERM $py "${bench[@]}" --presets base big --no-compile --json "$out/bench_eager.json"
step bench_compiled_base 215 TERM $py "${bench[@]}" --presets base --no-reference --profile-top 25 \
    --json "$out/bench_compiled_base.json"
train() {   # train NAME SECONDS ARGS...: the pipeline profile into runs/NAME, its CSV log kept
    local name=$1 limit=$2; shift 2
    step "$name" "$limit" INT $py -m transformer.train --profile wmt-news-base --out "runs/$name" \
        --no-progress "$@"
    cp "runs/$name/train_log.csv" "$out/${name}_log.csv" 2>> "$out/env.txt"
}
train train_eager 40 --set pad_to=8
left=$(( 535 - (SECONDS - start) ))
train train_compiled $(( left > 60 ? left : 60 )) --compile
$py scripts/gpu_compile_record.py "$out" >> "$out/env.txt" 2>&1
echo "done after $((SECONDS - start)) s" >> "$out/env.txt"
