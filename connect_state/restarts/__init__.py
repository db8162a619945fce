"""Auto-restart of FAILED connectors and tasks (issue 35): the policy (:mod:`connect_state.restarts.policy`: opt-in,
backoff, maximum count, reset; pure) and the pass that applies it (:mod:`connect_state.restarts.reconciler`: pure,
behind :class:`~connect_state.restarts.reconciler.RestartsIO`). The job is :mod:`connect_state.spark.restarts`."""
