"""The default configuration, shipped inside the package as ``connect_state.conf`` (see pyproject.toml)."""
