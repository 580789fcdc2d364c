"""Webhooks on a 3-primary Redis Cluster: the dispatcher follows queues whose
slots sit on different primaries, one XREADGROUP BLOCK per slot group, all at
once, and delivers their jobs' events to a real loopback receiver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.api import discovery, store
from dashboard.api.models import WebhookSubscription
from dashboard.shared import redis as dashboard_redis
from queues import Queue
from tests.api.helpers import Receiver, WorkerThread, dispatching, fast_config
from tests.cluster.spread import names_on_different_primaries, node_of
from tests.cluster.test_live import one_step
from tests.helpers import wait_until


@pytest.fixture
def cluster_api(settings: Any, redis_url: str) -> Iterator[str]:
    """The API and the dispatcher on the cluster; loopback receivers allowed."""
    settings.REDIS_URL = redis_url
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True
    dashboard_redis.reset()
    discovery.reset()
    yield redis_url
    dashboard_redis.reset()
    discovery.reset()


@pytest.mark.django_db
def test_subscriptions_on_two_primaries_get_their_events(
    cluster_api: str, r: Any
) -> None:
    """Two queues on different primaries, each with a subscription: every
    job's active, progress and completed reach the receiver once, and the
    dispatcher's blocking reads go two at a time (one per slot group).

    Queues tagged one per queue under the plain prefix `bull` (the API's
    own queues need a tagged BULLPEN_API_PREFIX, e.g. `{bull}`, as its queue
    names have no braces): the delivery queue is given a tag of its own."""
    qa, qb = names_on_different_primaries(r, "ab")
    assert node_of(r, "bull", qa) != node_of(r, "bull", qb)
    receiver = Receiver()
    events = "active,progress,completed"
    try:
        for name in (qa, qb):
            WebhookSubscription.objects.create(
                queue=name, url=receiver.url(), events=events
            )
        config = fast_config(delivery_queue="{bullpen-webhooks}")
        with dispatching(config) as dispatcher:
            workers = []
            for name in (qa, qb):
                workers.append(WorkerThread(name, one_step, cluster_api))
                with Queue(name, cluster_api) as queue:
                    queue.add("render", {})
            try:
                wait_until(lambda: len(receiver.requests) >= 6, what="6 webhooks")
            finally:
                for worker in workers:
                    worker.stop()
            reads = dispatcher.reader.group_reads
            assert reads is not None and reads._reads is not None
            rounds, sent = reads._reads.rounds, reads.reads
            assert rounds > 0 and sent == 2 * rounds
        got = sorted((b.json["queue"], b.json["event"]) for b in receiver.requests)
        assert got == sorted(
            (name, event) for name in (qa, qb) for event in events.split(",")
        )
    finally:
        receiver.close()


@pytest.mark.django_db
def test_subscriptions_mirror_is_rebuilt_on_a_cluster(cluster_api: str) -> None:
    """`sync_all` (runwebhooks runs it at start) rebuilds the mirror in one
    transaction on one key, which a cluster runs in that key's slot."""
    from dashboard.api import signals
    from dashboard.api.webhooks import registry

    sub = WebhookSubscription.objects.create(
        queue="{solo}", url="http://127.0.0.1:9/", events="completed"
    )
    store.client().hset(store.keys().subscriptions, "999", "{}")  # a stale one
    assert signals.sync_all() == 1
    mirrored = registry.subscriptions(store.client(), store.keys())
    assert [s["id"] for s in mirrored] == [sub.pk]


@pytest.mark.django_db
def test_dispatcher_without_a_tagged_delivery_queue_refuses_to_start(
    cluster_api: str,
) -> None:
    """Under the plain prefix `bull` the delivery queue's keys would spread
    over slots: the dispatcher refuses to start and says how to fix it."""
    from dashboard.api.webhooks.dispatcher import Dispatcher
    from queues.cluster import NoHashTag

    with pytest.raises(NoHashTag, match="Give the prefix a hash tag"):
        Dispatcher(fast_config())
