"""The dashboard deployed on PostgreSQL: what differs from SQLite there (the
PostgreSQL run of the dashboard and API suites is tests/testdb.py)."""
