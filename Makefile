# `make book`: install everything into .venv and build the book into _build/html from the outputs stored in the notebooks.
# `make execute`: run every notebook top to bottom and store its new outputs (after changing code; see README).
# `make test`: install everything into .venv and run the tests (unit, nbval over every notebook, export check).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# The corpora: $TRANSFORMER_DATA if set, else the offline copy beside the repository, if there is one
# (otherwise transformer.data downloads them into ~/.cache/transformer-data on first use).
ifeq ($(TRANSFORMER_DATA),)
ifneq ($(wildcard ../shared/data),)
export TRANSFORMER_DATA := $(abspath ../shared/data)
endif
endif

.PHONY: install book execute test export check-export benchmark result mutation clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and exactly pinned: an unpinned torch pulls a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[book,test]'
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build -W -n --keep-going .

execute: $(STAMP)
	$(PY) tools/execute_book.py

test: $(STAMP)
	$(PY) tools/export_package.py --check
	TRANSFORMER_PROFILE=tiny $(PY) -m pytest --nbval --nbval-sanitize-with tools/nbval_sanitize.cfg -p no:cacheprovider tests book

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
