# connect-state: `make run` starts the whole demo, `make test` sets up and runs the tests.
# Every install step lives here; pins come from conf/versions.env.
include conf/versions.env

SHELL        := /bin/bash
PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
PIP          := $(VENV)/bin/pip
MVN          ?= mvn
MVN_FLAGS    := -q -B
SPARK_LIB    := jvm/spark/lib
KAFKA_LIB    := jvm/kafka/lib
S3_LIB       := jvm/s3/lib
CONSTRAINTS  := build/constraints.txt
export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP        ?= 127.0.0.1

.PHONY: help setup venv dev-venv jars browser alerting-tools run test test-unit lint format bench cluster-env clean distclean

help:
	@echo "make run     set everything up and start broker, Connect worker, demo connectors, jobs and API"
	@echo "make test    set everything up and run the test suite"
	@echo "make lint    ruff check + format check + mypy + import layers;  make bench  run the benchmarks;  make clean  remove var/"
	@echo "make cluster-env  the jobs' packed Python environment and jars for spark-submit on a cluster (README)"

# `make run` needs the package with its spark extra and the jars; `make test` also the test, lint and packing tools and
# the browser of the dashboard's test.
setup: venv dev-venv jars browser alerting-tools

# The dashboard's test drives Debian's headless chromium through its chromedriver (Selenium): installed when missing
# (as root, like CI; elsewhere through sudo).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

# The alerts' tests: promtool (Debian's prometheus: `promtool check/test rules` of connect_state/alerts/
# prometheus-rules.yml) and a real Alertmanager (prometheus-alertmanager), installed when missing, like the browser.
# Neither is started as a service here: the tests start Alertmanager on a free loopback port.
alerting-tools:
	@if ! command -v promtool >/dev/null || ! command -v prometheus-alertmanager >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager; \
	fi

$(CONSTRAINTS): conf/versions.env
	@mkdir -p build
	@printf '%s\n' \
	  "pyspark==$(PYSPARK_VERSION)" "delta-spark==$(DELTA_SPARK_VERSION)" "pandas==$(PANDAS_VERSION)" \
	  "pyarrow==$(PYARROW_VERSION)" "deltalake==$(DELTALAKE_VERSION)" "chispa==$(CHISPA_VERSION)" \
	  "kafka-python==$(KAFKA_PYTHON_VERSION)" "flask==$(FLASK_VERSION)" "gunicorn==$(GUNICORN_VERSION)" \
	  "pytest==$(PYTEST_VERSION)" "pytest-timeout==$(PYTEST_TIMEOUT_VERSION)" "pytest-xdist==$(PYTEST_XDIST_VERSION)" \
	  "requests==$(REQUESTS_VERSION)" "click==$(CLICK_VERSION)" "types-pyyaml==$(TYPES_PYYAML_VERSION)" \
	  "ruff==$(RUFF_VERSION)" "mypy==$(MYPY_VERSION)" "pandas-stubs==$(PANDAS_STUBS_VERSION)" \
	  "types-requests==$(TYPES_REQUESTS_VERSION)" "import-linter==$(IMPORT_LINTER_VERSION)" "pyyaml==$(PYYAML_VERSION)" \
	  "databricks-bundles==$(DATABRICKS_BUNDLES_VERSION)" \
	  "prometheus-client==$(PROMETHEUS_CLIENT_VERSION)" "javaproperties==$(JAVAPROPERTIES_VERSION)" \
	  "tenacity==$(TENACITY_VERSION)" "selenium==$(SELENIUM_VERSION)" \
	  "schemathesis==$(SCHEMATHESIS_VERSION)" "venv-pack==$(VENV_PACK_VERSION)" "numpy==$(NUMPY_VERSION)" \
	  "hypothesis==$(HYPOTHESIS_VERSION)" > $@

venv: $(VENV)/.installed
$(VENV)/.installed: setup.cfg pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel "setuptools>=68"
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[spark]'
	@touch $@
dev-venv: $(VENV)/.installed-dev
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[spark,test,lint,pack]'
	@touch $@

jars: $(SPARK_LIB)/.fetched $(KAFKA_LIB)/.fetched $(S3_LIB)/.fetched
$(SPARK_LIB)/.fetched: jvm/spark/pom.xml conf/versions.env | $(VENV)/.installed
	rm -rf $(SPARK_LIB)
	$(MVN) $(MVN_FLAGS) -f jvm/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=lib -Ddelta.spark.artifact=$(DELTA_SPARK_ARTIFACT) \
	  -Ddelta.spark.version=$(DELTA_SPARK_VERSION) -Dspark.sql.kafka.version=$(SPARK_SQL_KAFKA_VERSION) \
	  -Dhadoop.aws.version=$(HADOOP_AWS_VERSION) -Daws.sdk.version=$(AWS_SDK_VERSION)
	$(PY) scripts/dedupe_spark_jars.py $(SPARK_LIB)
	@touch $@
$(KAFKA_LIB)/.fetched: jvm/kafka/pom.xml conf/versions.env
	rm -rf $(KAFKA_LIB)
	$(MVN) $(MVN_FLAGS) -f jvm/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=lib -Dkafka.version=$(KAFKA_VERSION) -Dlog4j2.version=$(LOG4J2_VERSION)
	@touch $@
$(S3_LIB)/.fetched: jvm/s3/pom.xml conf/versions.env
	rm -rf $(S3_LIB)
	$(MVN) $(MVN_FLAGS) -f jvm/s3/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=lib -Ds3proxy.version=$(S3PROXY_VERSION)
	@touch $@

# The jobs' Python environment for spark-submit on a cluster (README "spark-submit on a cluster"), shipped the way
# Spark's Python packaging guide ships one: a virtualenv holding the wheel, its dependencies and delta-spark's Python
# module (pyspark is the cluster's own: spark-submit puts it on every Python's path), packed by venv-pack for
# `spark-submit --archives`. The wheel is built under the lock the tests' wheel fixture takes (setuptools builds in
# build/). The jars come from `make jars`.
CLUSTER_ENV     := dist/connect-state-env.tar.gz
CLUSTER_ENV_DIR := build/cluster-env
cluster-env: dev-venv jars
	rm -rf $(CLUSTER_ENV_DIR) build/cluster-wheel $(CLUSTER_ENV)
	@mkdir -p build dist
	flock build/.wheel.lock $(PIP) wheel -q --no-deps --no-build-isolation -w build/cluster-wheel .
	$(PYTHON) -m venv $(CLUSTER_ENV_DIR)
	$(CLUSTER_ENV_DIR)/bin/pip install -q -c $(CONSTRAINTS) build/cluster-wheel/connect_state-*.whl
	$(CLUSTER_ENV_DIR)/bin/pip install -q -c $(CONSTRAINTS) --no-deps delta-spark
	$(VENV)/bin/venv-pack -q -p $(CLUSTER_ENV_DIR) -o $(CLUSTER_ENV) --compress-level 1 \
	  --exclude 'lib/python*/site-packages/pip/*' --exclude 'lib/python*/site-packages/pip-*'
	@echo "$(CLUSTER_ENV): $$(du -h $(CLUSTER_ENV) | cut -f1)"

run: venv jars
	$(VENV)/bin/connect-state-demo

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file at a time each, and the files that start JVMs
# of their own one after the other in one process (tests/fixtures/xdist.py); every process starts its own broker,
# Connect worker and SparkSession once and shares them between its tests. Three on 2 cores: the tests wait on Connect
# more than they compute (README, "Development"). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-unit: dev-venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

lint: dev-venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	scripts/typecheck.sh
	scripts/lint_imports.sh

format: dev-venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: setup
	$(PY) bench/active_topics.py
	$(PY) bench/connector_states.py
	$(PY) bench/offsets.py
	$(PY) bench/sink_offsets.py
	$(PY) bench/heartbeats.py
	$(PY) bench/api_reload.py

clean:
	rm -rf var spark-warehouse

distclean: clean
	rm -rf $(VENV) build $(SPARK_LIB) $(KAFKA_LIB) $(S3_LIB)
