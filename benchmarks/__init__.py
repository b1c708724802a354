"""Benchmarks: scripts that print measurements (see each file). `benchmarks.train_step` holds the
PyTorch reference that `benchmarks/gpu_step.py` also runs."""
