"""pytest hooks for every test run, tests/ and book/ alike: which CPU kernels the run uses.

`make test` compares the notebooks' stored outputs twice: on this machine's own kernels and on
PyTorch's portable ones (ATEN_CPU_CAPABILITY=default, see the Makefile). If PyTorch ignored the
variable, the second comparison would silently repeat the first, so a run that asks for a kernel
path and does not get it stops here.
"""
import os

import pytest


def _capability():
    import torch
    return torch.backends.cpu.get_cpu_capability()


def pytest_report_header(config):
    forced = {k: v for k, v in os.environ.items()
              if k in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "DNNL_MAX_CPU_ISA",
                       "OPENBLAS_CORETYPE")}
    return f"CPU kernels: PyTorch {_capability()}" + (f" (forced: {forced})" if forced else " (this CPU's own)")


def pytest_sessionstart(session):
    wanted = os.environ.get("ATEN_CPU_CAPABILITY")
    if wanted and _capability().lower() != wanted.lower():
        raise pytest.UsageError(f"ATEN_CPU_CAPABILITY={wanted} asks for PyTorch's {wanted} kernels, "
                                f"but PyTorch runs {_capability()}: the comparison would not test them")
