"""Bullpen's Django side. The package's top-level modules are the standalone
site (settings, root URLs, ASGI, `make run`, the `bullpen` CLI); its parts are
two apps, `console` (the operator pages) and `api` (the producer API), and
the leaf both use, `shared` (docs/architecture.md)."""
