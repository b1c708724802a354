# Sourced by the GPU check scripts. gpu_env FILE PYTHON: the date, the GPU, the versions
# that matter and the commit, written to FILE, so that every check says what it ran on.
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
