"""The local development harness: the embedded broker and Connect worker, the demo, its hooks and providers, and a
Connect REST client. Production code never imports it (tests and `make run` do)."""
