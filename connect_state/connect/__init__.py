"""Kafka Connect's own concepts, one home each, named as Connect names them. Pure Python: no Spark, Kafka, Delta or
Flask.

* :mod:`.vocabulary`: Connect's enums (``TargetState``, ``AbstractStatus.State``, ``ConnectorType``) as ``StrEnum``,
  so tables and JSON keep the same strings;
* :mod:`.connector_types`: a connector's class (``connector.class``), its ``PluginUtils`` aliases and its type;
* :mod:`.offset_stores`: where a connector's offsets live, after ``Worker``'s construction of a
  ``ConnectorOffsetBackingStore`` (the worker's offsets topic, the connector's own ``offsets.storage.topic``: which is
  read, which are written, in what order) and a sink connector's consumer group;
* :mod:`.filestream`: Kafka's FileStream connectors (``connect-file``): classes, configs, ``alterOffsets`` checks;
* :mod:`.mirror_maker`: Kafka's MirrorMaker 2 connectors (``connect-mirror``): classes, ``alterOffsets`` checks;
* :mod:`.alter_offsets`: KIP-875 ``alterOffsets`` as a plug-in point per connector class (built-in and configured
  rules, Connect's answers to what they return or raise);
* :mod:`.rest`: Connect's REST messages and response bodies.

The byte formats of the internal topics live in :mod:`connect_state.formats`, the folds in :mod:`connect_state.folds`.
"""
