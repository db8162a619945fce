"""A Kafka partition as the code passes it around: ``(topic, partition number)``."""

Partition = tuple[str, int]
