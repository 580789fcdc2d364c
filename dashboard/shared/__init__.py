"""The small leaf both dashboard apps use (the operator app and the producer
API): typed settings, the Redis client factory, redaction, queue discovery, the
event -> public dict and the job verbs. It imports no app and no part of the
standalone site (tests/test_structure.py)."""
