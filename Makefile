# `make book`: install everything into .venv and build the book (every chapter executed on the CPU) into _build/html.
# `make test`: install everything into .venv and run the tests (unit, nbval over every notebook, export check).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install book test export check-export benchmark clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and exactly pinned: an unpinned torch pulls a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[book,test]'
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build -W -n --keep-going .

test: $(STAMP)
	$(PY) tools/export_package.py --check
	$(PY) -m pytest --nbval-lax -p no:cacheprovider tests book

export: $(STAMP)
	$(PY) tools/export_package.py

benchmark: $(STAMP)
	$(PY) benchmarks/train_throughput.py

clean:
	rm -rf _build
