"""`manage.py apitoken create|revoke|list`: API tokens from the shell.

manage.py apitoken create --name shop --queues render,upscale --scope read,write
manage.py apitoken create --name reseller --queues render --scope write \
    --group reseller --may-set-group
manage.py apitoken create --name ops --queues '*' --scope read,admin
manage.py apitoken list
manage.py apitoken revoke bp_ab12cd34
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.api.models import ApiToken

SCOPES = ("read", "write", "admin")


class Command(BaseCommand):
    help = "Create, revoke or list API tokens (the plain token is printed once)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="issue a token")
        create.add_argument("--name", required=True)
        create.add_argument(
            "--queues", required=True, help="comma-separated queue names, or *"
        )
        create.add_argument(
            "--scope",
            default="read",
            help="comma-separated read, write, admin (default read; admin: "
            "the queues' group settings)",
        )
        create.add_argument(
            "--group",
            default="",
            help="its jobs' group (default: derived from --name)",
        )
        create.add_argument(
            "--no-group-jobs",
            action="store_true",
            help="its jobs have no group (no fair turns)",
        )
        create.add_argument(
            "--may-set-group",
            action="store_true",
            help="requests may send options.group: the job's group is then "
            "<its group>/<given>",
        )
        create.add_argument("--rate-limit", type=int, help="requests per minute")
        create.add_argument("--json", action="store_true", help="print JSON")
        revoke = sub.add_parser("revoke", help="revoke a token")
        revoke.add_argument("token", help="its prefix (bp_xxxxxxxx) or id")
        listing = sub.add_parser("list", help="list tokens")
        listing.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _create(self, options: dict[str, Any]) -> None:
        scopes = {s.strip() for s in options["scope"].split(",") if s.strip()}
        if not scopes or scopes - set(SCOPES):
            raise CommandError("--scope must be some of read, write, admin")
        try:
            token, plain = ApiToken.issue(
                options["name"],
                options["queues"],
                can_read="read" in scopes,
                can_write="write" in scopes,
                rate_limit_per_min=options.get("rate_limit"),
                can_admin="admin" in scopes,
                group=options["group"],
                group_jobs=not options["no_group_jobs"],
                may_set_group=options["may_set_group"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "id": token.pk,
                        "prefix": token.prefix,
                        "token": plain,
                        "webhook_secret": token.webhook_secret,
                        "group": token.group_id if token.group_jobs else None,
                    }
                )
            )
            return
        self.stdout.write(f"token:          {plain}")
        self.stdout.write(f"webhook secret: {token.webhook_secret}")
        if token.group_jobs:
            sub = " (and <group>/<given> per job)" if token.may_set_group else ""
            self.stdout.write(f"jobs' group:    {token.group_id}{sub}")
        self.stdout.write("Store the token now: only its hash is kept.")

    def _revoke(self, options: dict[str, Any]) -> None:
        ident = options["token"]
        query = ApiToken.objects.filter(prefix=ident)
        if ident.isdigit():
            query = ApiToken.objects.filter(pk=int(ident))
        token = query.first()
        if token is None:
            raise CommandError(f"no token {ident}")
        token.revoke()
        self.stdout.write(f"revoked {token.prefix} ({token.name})")

    def _list(self, options: dict[str, Any]) -> None:
        rows: list[dict[str, Any]] = [
            {
                "id": t.pk,
                "prefix": t.prefix,
                "name": t.name,
                "queues": t.queue_list,
                "scope": ",".join(
                    s
                    for s, ok in zip(SCOPES, (t.can_read, t.can_write, t.can_admin))
                    if ok
                ),
                "group": t.group_id if t.group_jobs else None,
                "may_set_group": t.may_set_group,
                "rate_limit_per_min": t.rate_limit_per_min,
                "created_at": t.created_at.isoformat(),
                "last_used_at": t.last_used_at.isoformat() if t.last_used_at else None,
                "revoked": t.revoked_at is not None,
            }
            for t in ApiToken.objects.order_by("pk")
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows))
            return
        for r in rows:
            state = "revoked" if r["revoked"] else "active"
            self.stdout.write(
                f"{r['id']:>4}  {r['prefix']}  {r['name']:<20} {r['scope']:<10} "
                f"{','.join(r['queues']):<30} {r['group'] or '-':<20} {state}"
            )
