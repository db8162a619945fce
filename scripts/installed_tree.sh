#!/usr/bin/env bash
# A tree of links with the package's installed shape, for tools that read the source tree: api/, jobs/, cli/ and conf/
# are connect_state.api, .jobs, .cli and .conf (pyproject.toml's package-dir), which no tool maps from the checkout by
# itself.
# Usage: scripts/installed_tree.sh <dir> (emptied first); <dir>/connect_state is then the package.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$1
rm -rf "$root" && mkdir -p "$root/connect_state"
for entry in connect_state/*; do
  case "$(basename "$entry")" in __pycache__) continue ;; esac
  ln -s "$PWD/$entry" "$root/connect_state/$(basename "$entry")"
done
for mapped in api jobs cli conf; do ln -s "$PWD/$mapped" "$root/connect_state/$mapped"; done
