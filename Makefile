# Two commands do all set-up on a fresh machine (see README.md):
#   make demo   create .venv, install, train +experiment=zh_en_local_p_10min on the packaged Tatoeba corpus (HSK mixed in),
#               evaluate it on the held-out test split, translate five everyday sentences, write the record
#   make test   create .venv if needed, install, run the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN ?= outputs/demo
EXPERIMENT ?= zh_en_local_p_10min
SENTENCES ?= 我爱你。 今天天气很好。 你叫什么名字？ 我想喝一杯咖啡。 他明天要去北京。

.PHONY: demo test venv lint clean browser

venv: $(VENV)/.installed

# On a machine without an NVIDIA GPU, torch is pinned to the CPU build first (torch==2.13.0
# lies on the project's CI disk); with a GPU, pip's normal resolution picks the CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q torch==2.13.0; fi
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The demo's record (docs/results/demo_<date>.json: date, commit, CPU, updates, speed, memory, BLEU, the five
# translations) is what the README's demo block shows once committed (scripts/records/render_records.py).
demo: venv
	$(PY) -m nmt.train +experiment=$(EXPERIMENT) hydra.run.dir=$(RUN)
	$(PY) -m nmt.evaluate $(RUN) --split test --beam 5 --json > $(RUN)/evaluate_test.json
	$(PY) -m nmt.translate $(RUN) --beam 5 --with-source $(SENTENCES) > $(RUN)/translations.tsv
	$(PY) scripts/records/demo_record.py $(RUN)

# tests/test_page.py drives Debian's chromium through chromedriver: installed here when missing and
# this is a root shell with apt-get (as in CI); elsewhere that test is skipped with a note.
CAN_APT := $(shell [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo 1)

browser:
	@if [ -n "$(CAN_APT)" ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; fi

test: venv browser
	NMT_REQUIRE_BROWSER=$(CAN_APT) $(PY) -m pytest -q -n 2

lint: venv
	$(VENV)/bin/ruff check nmt scripts tests

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache
