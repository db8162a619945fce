"""``connect-state``: the command line of the connect-state API, in kcctl's habits.

It talks to the API over HTTP only (``requests``) and imports neither the API's code, the jobs, Spark, Flask nor
Delta (an import-linter contract in pyproject.toml keeps it so). One module per concern:

* :mod:`~connect_state.cli.main`: the root command, its global options, the list of command modules;
* :mod:`~connect_state.cli.errors`: the exit codes (:class:`~connect_state.cli.errors.ExitCode`) and the typed errors
  that carry them;
* :mod:`~connect_state.cli.contexts`: the contexts file (API URL, credentials, TLS), private, with ``${env:NAME}``
  references resolved at use;
* :mod:`~connect_state.cli.client`: the HTTP client of one context;
* :mod:`~connect_state.cli.output`: tables, JSON and YAML;
* :mod:`~connect_state.cli.bulk`: NAME or ``-e REGEX`` selections, confirmation, dry runs and progress;
* the commands, each module adding its own through ``register(root)``: :mod:`~connect_state.cli.context_commands`,
  :mod:`~connect_state.cli.connectors` (``get connectors``, ``describe connector``),
  :mod:`~connect_state.cli.actions` (``pause|resume|stop|restart connector``), :mod:`~connect_state.cli.offsets`
  (``offsets get|patch|reset``), :mod:`~connect_state.cli.timeline` (``history``, ``deletions``, ``heartbeats``),
  :mod:`~connect_state.cli.availability` (``availability [NAME]``).
"""
