"""Webhooks: signing, the SSRF policy, the sender, the outbox and the
dispatcher (`manage.py runwebhooks`)."""
