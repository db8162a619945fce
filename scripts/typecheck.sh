#!/usr/bin/env bash
# mypy over the package as it installs (scripts/installed_tree.sh); reported paths read connect_state/api/... for
# api/... .
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/typecheck
scripts/installed_tree.sh "$root"
cd "$root"
exec "${MYPY:-../../.venv/bin/mypy}" --config-file ../../pyproject.toml -p connect_state "$@"
