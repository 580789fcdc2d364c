"""A handler module that cannot be imported: its worker process exits at start."""

raise RuntimeError("this handler module is broken on purpose")
