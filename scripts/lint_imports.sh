#!/usr/bin/env bash
# The package's layering (pyproject.toml's [tool.importlinter] contracts) checked by import-linter over the package as
# it installs (scripts/installed_tree.sh), so api/ and jobs/ are seen as connect_state.api and connect_state.jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/lint-imports
scripts/installed_tree.sh "$root"
cd "$root"
PYTHONPATH="$PWD" exec "${LINT_IMPORTS:-../../.venv/bin/lint-imports}" --config ../../pyproject.toml --no-cache "$@"
