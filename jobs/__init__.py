"""The jobs' console scripts (``connect-state-jobs``, ``connect-state-active-topics`` ...), one entry point a file.

They run Spark: pyspark and delta-spark's Python module, which the wheel leaves to its ``spark`` extra because a
cluster brings its own (spark-submit, Databricks). Started from a wheel installed without them, a console script says
what to install and exits with status 2, instead of a traceback from the first import.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

#: The modules the jobs import that the wheel does not depend on, with the package that brings each.
SPARK_MODULES = {"pyspark": "pyspark", "delta": "delta-spark"}

_missing = [package for module, package in SPARK_MODULES.items() if find_spec(module) is None]
if _missing:
    print(
        f"connect-state's jobs need {' and '.join(_missing)}, which this Python does not have: install them with "
        "`pip install 'connect-state[spark]'`, or run the jobs with spark-submit (README: spark-submit on a cluster)",
        file=sys.stderr,
    )
    raise SystemExit(2)
