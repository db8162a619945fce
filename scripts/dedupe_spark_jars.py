"""Drop from jvm/spark/lib every jar whose artifact pyspark already ships in pyspark/jars.

Spark's own jars must win (newer jackson, hadoop, parquet...). Jars given with spark.jars are loaded by a child
class loader, so a duplicate would only waste download time and confuse readers of the classpath; removing them
keeps the classpath honest. Then check that the jars the project needs are present.

Usage: python scripts/dedupe_spark_jars.py jvm/spark/lib
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyspark

REQUIRED = (
    "delta-spark_",
    "delta-storage",
    "delta-kernel-api",
    "spark-sql-kafka-0-10_",
    "spark-token-provider-kafka-0-10_",
    "kafka-clients",
    "commons-pool2",
    "hadoop-aws",
    "s3-transfer-manager",
)
_VERSION = re.compile(r"-\d[\w.\-]*\.jar$")


def artifact_id(jar_name: str) -> str:
    """`jackson-core-2.13.5.jar` -> `jackson-core`."""
    return _VERSION.sub("", jar_name)


def main(lib: Path) -> int:
    shipped = {artifact_id(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in sorted(lib.glob("*.jar")):
        if artifact_id(jar.name) in shipped:
            jar.unlink()
            print(f"dropped {jar.name}: pyspark ships {artifact_id(jar.name)}")
    left = [p.name for p in lib.glob("*.jar")]
    missing = [r for r in REQUIRED if not any(name.startswith(r) for name in left)]
    if missing:
        print(f"missing required jars in {lib}: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
