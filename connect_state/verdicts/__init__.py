"""Verdicts: what is wrong with a connector, judged from the tables and the topics (issue 35)."""
