"""The suite's own scheduling between test processes (tests/fixtures/xdist.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fixtures.xdist import OWN_JVMS, OWN_JVMS_GROUP, work_unit

REPO_ROOT = Path(__file__).resolve().parents[2]
IMPORTS_DRIVERS = re.compile(r"^from tests\.integration\.drivers import", re.MULTILINE)


@pytest.mark.parametrize("path", sorted(OWN_JVMS))
def test_every_file_of_the_group_exists(path: str) -> None:
    assert (REPO_ROOT / path).is_file(), f"{path} is in OWN_JVMS but not in the repository: renamed?"


def test_every_file_that_starts_drivers_is_in_the_group() -> None:
    starting = {
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "tests").rglob("test_*.py")
        if IMPORTS_DRIVERS.search(path.read_text())
    }
    assert starting, "no test file starts drivers: did tests/integration/drivers.py move?"
    assert starting <= OWN_JVMS, f"start Spark drivers of their own but run beside the others: {starting - OWN_JVMS}"


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/integration/test_leases_connect.py::test_two[x]", OWN_JVMS_GROUP),
        ("tests/packaging/test_spark_submit.py::test_a", OWN_JVMS_GROUP),
        ("tests/integration/test_cleanup_connect.py::test_b[a::b]", "tests/integration/test_cleanup_connect.py"),
        ("tests/unit/test_api.py::TestX::test_y", "tests/unit/test_api.py"),
    ],
)
def test_work_units(nodeid: str, unit: str) -> None:
    assert work_unit(nodeid) == unit
