# `make book`: install everything into .venv and build the book into _build/html from the outputs stored in the notebooks.
# `make book` builds both editions: the English one, then the Chinese one into _build/html/zh, from the same
#   notebooks and the catalogues in locale/zh_CN (each page links to its counterpart in the other).
# `make book-zh`: only the Chinese edition again (after a change to the catalogues).
# `make gettext`: refresh those catalogues after the English prose changed (see tools/book_zh.py).
# `make execute`: run every notebook top to bottom and store its new outputs (after changing code; see README).
# `make test`: install everything into .venv and run the tests (unit, nbval over every notebook, export check),
#   then compare the notebooks a second time on PyTorch's portable CPU kernels (see KERNELS).
# `make lab`: open the book's notebooks in JupyterLab, running on the project's environment (installs JupyterLab
#   into .venv the first time).
# `make test-kernels`: only that second comparison; `make test-kernels KERNELS="ATEN_CPU_CAPABILITY=avx2 ..."`
#   runs it on another kernel path.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# The corpora: $TRANSFORMER_DATA if set, else the offline copy beside the repository, if there is one
# (otherwise transformer.corpora downloads them into ~/.cache/transformer-data on first use).
ifeq ($(TRANSFORMER_DATA),)
ifneq ($(wildcard ../shared/data),)
export TRANSFORMER_DATA := $(abspath ../shared/data)
endif
endif

.PHONY: install lab book book-zh gettext execute test test-kernels export benchmark result mutation clean

# nbval over the notebooks with the tiny profile: every stored output is compared, except cells tagged
# nbval-ignore-output (each names its reason), after the substitutions in tools/nbval_sanitize.cfg.
NBVAL := TRANSFORMER_PROFILE=tiny $(PY) -m pytest --nbval --nbval-sanitize-with tools/nbval_sanitize.cfg -p no:cacheprovider
# Stored outputs must not depend on the CPU that recorded them. PyTorch, MKL, oneDNN and OpenBLAS pick
# kernels by instruction set, and each rounds in its own order; these variables force another choice
# than this machine's own: PyTorch's portable kernels (no SIMD) and the libraries held to SSE4. On a
# CPU where a library is not used (MKL on ARM, say) its variable changes nothing.
KERNELS := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 DNNL_MAX_CPU_ISA=SSE41
ifeq ($(shell uname -m),x86_64)
KERNELS += OPENBLAS_CORETYPE=Prescott
endif

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and exactly pinned: an unpinned torch pulls a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[book,test]'
	touch $(STAMP)

install: $(STAMP)

LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP)
	$(PIP) install -q -c constraints.txt -e '.[lab]'
	touch $(LAB_STAMP)

# e.g. LAB_ARGS="--no-browser --port 8890", or --allow-root inside a container that runs as root
LAB_ARGS ?=
lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab book/ $(LAB_ARGS)

# then the code itself into the site (_build/html/downloads/): the source archive, the wheel, the model
book: $(STAMP)
	$(VENV)/bin/jupyter-book build -W -n --keep-going .
	$(PY) tools/site_downloads.py _build/html
	$(PY) tools/book_zh.py html

book-zh: $(STAMP)
	$(PY) tools/book_zh.py html

gettext: $(STAMP)
	$(PY) tools/book_zh.py gettext
	$(PY) tools/catalogues.py || true

execute: $(STAMP)
	$(PY) tools/execute_book.py

test: $(STAMP)
	$(PY) tools/export_package.py --check
	$(NBVAL) tests book
	$(KERNELS) $(NBVAL) book

test-kernels: $(STAMP)
	$(KERNELS) $(NBVAL) book

export: $(STAMP)
	$(PY) tools/export_package.py

benchmark: $(STAMP)
	$(PY) benchmarks/train_step.py
	$(PY) benchmarks/decode_cache.py
	$(PY) benchmarks/cpu_training.py
	$(PY) benchmarks/gpu_step.py --smoke

# The book's real result (the multi30k-cpu profile: a fixed step count, about an hour on a 2-core CPU): trains, chooses decoding on dev, scores test, writes results/multi30k-cpu/
result: $(STAMP)
	$(PY) scripts/multi30k_cpu.py

clean:
	rm -rf _build

# Mutation testing of the core modules (about an hour on 2 cores; not part of CI): see tools/mutation.py
mutation: $(STAMP)
	$(PIP) install -q -c constraints.txt -e '.[mutation]'
	$(PY) tools/mutation.py
