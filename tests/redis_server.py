"""Test-side name of the throwaway redis-server helper (see queues/devredis.py)."""

from queues.devredis import RedisServer, find_redis_server, free_port

__all__ = ["RedisServer", "find_redis_server", "free_port"]
