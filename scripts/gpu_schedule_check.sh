#!/usr/bin/env bash
# Did the wmt-news-base pipeline profile stay at the unigram level because its learning
# rate peaked too high? Its 400 warm-up steps at factor 1 put equation 3's peak at
# sqrt(10) = 3.16x the paper's (the profile now has factor 0.316, the second schedule).
# Three schedules of the same 1000-step profile, trained side by side on one GPU
# (eager, bf16 autocast), each stopped by SIGINT at its limit, then each scored on dev
# (beam 4, the profile's 5-checkpoint average):
#   w4000  the paper's schedule (warmup 4000, factor 1): by step 1000, a quarter of its peak
#   f0316  warmup 400, factor 0.316: the paper's peak rate, reached at step 400
#   f05    warmup 400, factor 0.5: between that and the old 3.16x
# Usage: scripts/gpu_schedule_check.sh OUT_DIR [LIMIT_S]   (logs and CSVs in OUT_DIR)
# A run folder that already holds the profile's prepared data (runs/sched-NAME) is used.
set -u
out=${1:?usage: scripts/gpu_schedule_check.sh OUT_DIR [LIMIT_S]}
limit=${2:-360}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
gpu_env "$out/env.txt" "$py"
run() {     # run NAME KEY=VALUE...: one schedule, bounded by the limit, then its dev score
    local name=$1; shift
    local t0=$SECONDS dir=runs/sched-$name
    # --foreground: SIGINT reaches the trainer once, and it saves the step it is on
    timeout --foreground -s INT "$limit" $py -m transformer.train --profile wmt-news-base \
        --out "$dir" --no-progress --set "$@" > "$out/$name.log" 2>&1
    echo "$name: train exit $? after $((SECONDS - t0)) s (limit $limit s): --set $*" \
        >> "$out/env.txt"
    cp "$dir/train_log.csv" "$out/${name}_train_log.csv"
    cp "$dir/dev_log.csv" "$out/${name}_dev_log.csv"
    t0=$SECONDS
    timeout --foreground 120 $py -m transformer.evaluate "$dir" --split dev \
        --hyps "$out/${name}_dev_hyps.txt" > "$out/${name}_evaluate.log" 2>&1
    echo "$name: evaluate exit $? after $((SECONDS - t0)) s" >> "$out/env.txt"
}
run w4000 warmup_steps=4000 lr_factor=1 &
run f0316 lr_factor=0.316 &
run f05 lr_factor=0.5 &
wait
