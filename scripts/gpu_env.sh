# Sourced by the GPU check scripts. gpu_env FILE PYTHON: the date, the GPU, the versions
# that matter and the commit, written to FILE, so that every check says what it ran on;
# step: one bounded step of a check.
gpu_env() {
    {
        date -u +%Y-%m-%dT%H:%M:%SZ
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        "$2" -c "import torch, sacrebleu, sentencepiece; print('torch', torch.__version__,
'CUDA', torch.version.cuda, 'sacrebleu', sacrebleu.__version__, 'sentencepiece',
sentencepiece.__version__)"
        nproc
        git rev-parse HEAD 2>/dev/null
    } > "$1" 2>&1
}

step() {    # step NAME SECONDS SIGNAL COMMAND...: run it bounded, its output in $out/NAME.log, how it
            # ended in $out/env.txt ($out: the calling script's output folder)
    local name=$1 limit=$2 sig=$3; shift 3
    local t0=$SECONDS
    # --foreground: the signal goes to the command alone; without it, timeout also signals
    # its process group, and a second SIGINT interrupts the trainer at once, unsaved
    timeout --foreground -s "$sig" "$limit" "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - t0)) s (limit $limit s): $*" >> "$out/env.txt"
}
