"""The producer HTTP API (/api/v1/), API tokens, webhooks and SSE.

A Django app of its own (label `bullpen_api`) inside the dashboard project:

- `operations`: what an operation is, and the registry the views declare
  themselves in; the URLconf (`urls`) and the OpenAPI document (`spec`) are
  both generated from it
- `views/`: the operations (enqueue, job status, cancel/remove, counts, SSE,
  deliveries, the OpenAPI document)
- `auth`, `ratelimit`, `idempotency`, `validation`: what every request passes
- settings: `dashboard.shared.conf` (`conf.get()`), shared with the pages;
  `defaults` holds the API's fixed tunables
- `store`, `keys`, `discovery`: its Redis client (`dashboard.shared.redis`'s),
  Bullpen's own keys, and the queues a `*` token lists
- `webhooks/`: signing, SSRF policy, the delivery sender, the outbox and the
  dispatcher that `manage.py runwebhooks` runs
"""
