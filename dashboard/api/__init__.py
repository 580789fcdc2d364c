"""The producer HTTP API (/api/v1/), API tokens, webhooks and SSE.

A Django app of its own (label `bullpen_api`) inside the dashboard project:

- `spec`: the one declarative description of every operation; the URLconf
  and the OpenAPI document are both generated from it
- `views/`: the operations (enqueue, job status, cancel/remove, counts, SSE,
  deliveries, the OpenAPI document)
- `auth`, `ratelimit`, `idempotency`, `validation`: what every request passes
- `webhooks/`: signing, SSRF policy, the delivery sender, the outbox and the
  dispatcher that `manage.py runwebhooks` runs
"""
