# Two commands for a fresh machine (see README):  make demo   |   make test
# While working: make check (installs kcat and WordNet as make test does; linter, type checker, import contracts, unit and contract tests: about a minute).
VENV ?= .venv
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test check docs install kafka kcat browser wordnet clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# Then a few of the fold's modules compiled by mypyc into build/compiled/ (where a C
# compiler is; else the pure modules run, as they do whenever a source changed since).
install: $(VENV)/.installed
	@$(VENV)/bin/python -m emgas.tools.compiled

# Apache Kafka's jars from Maven Central (streams/kafka/broker/pom.xml), once, into
# ~/.cache/emgas: `emgas broker` and the tests then run a real Kafka (Java 17+).
kafka: install
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then $(VENV)/bin/emgas broker --install; \
	else echo "no java or mvn: emgas broker runs librdkafka's mock cluster, and the tests that need Kafka are skipped"; fi

# The interop test drives kcat, a Kafka client no one here wrote (Debian package).
kcat:
	@command -v kcat >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat; }

# WordNet 3.0 (Debian's wordnet-base, /usr/share/wordnet): query words the
# graph lacks are expanded to the concepts it relates them to (pet -> greyhound).
wordnet:
	@[ -f /usr/share/wordnet/data.noun ] || [ -n "$$EMGAS_WORDNET_DIR" ] || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wordnet-base; }

# The viewer test drives Debian's Chromium with playwright-core (npm).
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }
	@[ -d tests/browser/node_modules/playwright-core ] || npm ci --prefix tests/browser --silent

demo: install kafka wordnet
	$(VENV)/bin/emgas demo

test: install kafka kcat browser wordnet
	$(VENV)/bin/pytest

# The reference pages in docs/reference/ (settings, wire format, metrics, CLI), from the code.
docs: install
	$(VENV)/bin/python -m emgas.tools.reference

check: install wordnet kcat
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -m "not slow"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info tests/browser/node_modules test-artifacts
