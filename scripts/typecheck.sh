#!/usr/bin/env bash
# mypy over the package as it installs: api/, jobs/ and conf/ are connect_state.api, .jobs and .conf (pyproject.toml's
# package-dir), which mypy cannot map from the source tree. A tree of links under build/typecheck gives it the
# installed shape; reported paths read connect_state/api/... for api/... .
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/typecheck
rm -rf "$root" && mkdir -p "$root/connect_state"
for entry in connect_state/*; do
  case "$(basename "$entry")" in __pycache__) continue ;; esac
  ln -s "$PWD/$entry" "$root/connect_state/$(basename "$entry")"
done
for mapped in api jobs conf; do ln -s "$PWD/$mapped" "$root/connect_state/$mapped"; done
cd "$root"
exec "${MYPY:-../../.venv/bin/mypy}" --config-file ../../pyproject.toml -p connect_state "$@"
