"""A small Django project of its own that mounts Bullpen's dashboard and API
under /ops/queues/, as docs/embedding.md tells a host project to."""
