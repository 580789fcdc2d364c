"""What every page and action shares: permission checks, the queue in the URL,
the audited action wrapper and its htmx / plain-form responses."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from dashboard.shared.discovery import QueueRef, is_allowed, is_read_only, queue_exists
from gpu_workers.exceptions import GpuWorkerError
from queues.exceptions import QueueError
from queues.outages import describe, recoverable, refusal_code, refusal_meaning

from .. import audit
from ..models import OPERATE, SCALE, VIEW

__all__ = ["OPERATE", "SCALE", "VIEW"]

log = logging.getLogger(__name__)

View = Callable[..., HttpResponse]
#: Seconds a 503 asks the browser (and the page's refresh) to wait.
RETRY_AFTER_S = 5


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request (it then wants a fragment)."""
    return request.headers.get("HX-Request") == "true"


def to_login(request: HttpRequest) -> HttpResponse:
    """Send an anonymous user to the dashboard's own login page (under the
    prefix it is mounted at, whatever a host's LOGIN_URL is); htmx gets
    HX-Redirect so the whole page goes there (not the login form swapped into
    a fragment)."""
    login_url = reverse("bullpen:login")
    if is_htmx(request):
        current = request.headers.get("HX-Current-URL", "")
        path = urlsplit(current).path if current else request.get_full_path()
        response = redirect_to_login(path or reverse("bullpen:overview"), login_url)
        return HttpResponse(headers={"HX-Redirect": response["Location"]})
    return redirect_to_login(request.get_full_path(), login_url)


def int_param(request: HttpRequest, name: str, default: int, least: int) -> int:
    """A whole-number query parameter, at least `least`; `default` when it
    is missing or not a number (a pasted or edited URL never fails a page)."""
    try:
        return max(int(request.GET.get(name, default)), least)
    except ValueError:
        return default


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """A 403: a flash fragment for htmx, else the 403 page."""
    template = "dashboard/_flash.html" if is_htmx(request) else "dashboard/403.html"
    return render(request, template, {"level": "error", "message": message}, status=403)


def not_found(request: HttpRequest, message: str) -> HttpResponse:
    """Our own 404 (DEBUG or not, never Django's debug page): a flash
    fragment for htmx, else the 404 page, with no actions on it."""
    template = "dashboard/_flash.html" if is_htmx(request) else "dashboard/404.html"
    context = {"level": "error", "message": message, "exception": message}
    return render(request, template, context, status=404)


def dispatch(
    request: HttpRequest,
    actions: Mapping[str, View],
    verb: str,
    *args: str,
    what: str = "action",
) -> HttpResponse:
    """The action view of `verb` called with `args` (the URL's parts), or our
    404 naming the verb when there is none."""
    view = actions.get(verb)
    if view is None:
        return not_found(request, f"no such {what}: {verb!r}")
    return view(request, *args)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a 403 an operator can act on (a flash for htmx)."""
    return forbidden(
        request,
        "The page's security token is missing or expired: "
        "reload the page and try again.",
    )


def redacted_url(url: str) -> str:
    """A Redis URL fit for a page: its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:" if parts.username else ":"
    return parts._replace(netloc=f"{user}***@{host}").geturl()


def redis_unavailable(
    request: HttpRequest, exc: BaseException, acted: bool = False
) -> HttpResponse:
    """A 503 an operator can read when Redis does not answer: the full page
    (it reloads itself every few seconds), or for htmx a flash in #flash that
    leaves the page's content and its polling in place."""
    where = redacted_url(settings.REDIS_URL)
    detail = str(exc).rstrip(".") or type(exc).__name__
    log.warning("redis at %s unavailable for %s: %s", where, request.path, detail)
    code = refusal_code(exc)
    if code:  # it answers, but refuses for a while (maxmemory, read-only...)
        message = f"Redis at {where} refuses this for now: {refusal_meaning(code)}."
    else:
        message = f"Redis at {where} is not answering: {detail}."
    if acted:
        message += " The action may not have taken effect: check once Redis is back."
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    if is_htmx(request):
        headers.update({"HX-Retarget": "#flash", "HX-Reswap": "innerHTML"})
        template = "dashboard/_flash.html"
    else:
        template = "dashboard/503.html"
    context = {"level": "error", "message": message, "retry_s": RETRY_AFTER_S}
    response = render(request, template, context, status=503)
    for name, value in headers.items():
        response[name] = value
    return response


def perm_required(perm: str) -> Callable[[View], View]:
    """Anonymous users go to the login page; users without `perm` get a 403;
    an Http404 raised by the view becomes our 404 page."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return to_login(request)
            if not request.user.has_perm(perm):
                return forbidden(request, f"You need the {perm} permission.")
            try:
                return view(request, *args, **kwargs)
            except Http404 as exc:
                return not_found(request, str(exc))

        return wrapper

    return decorate


def queue_ref(prefix: str, name: str, must_exist: bool = True) -> QueueRef:
    """The queue named in the URL, or 404 when the dashboard may not show it
    or (`must_exist`) it is neither configured nor in Redis: a mistyped name
    gets a "no such queue" page, not an empty queue whose actions would
    create it."""
    ref = QueueRef(prefix, name)
    if not is_allowed(ref) or (must_exist and not queue_exists(ref)):
        raise Http404(f"No such queue: {ref.key}")
    return ref


def live_json(**follow: Any) -> str:
    """The body's `data-live` JSON (escaped by the template, as an attribute)."""
    return json.dumps({k: v for k, v in follow.items() if v})


# --- actions -----------------------------------------------------------------
class ActionError(Exception):
    """Raised by an action for a refusal the operator should read (409)."""


class BadInput(ActionError):
    """Raised by an action when its form is invalid (400)."""


@dataclass
class Done:
    """An action's success: the message, and where to go when the target is gone."""

    message: str
    redirect: str | None = None
    #: Reload the page the form is on (its header changed, e.g. paused).
    reload: bool = False
    #: What the audit row keeps when it is more than the message (else the message).
    detail: str = ""
    #: The action wrote its own audit row (a batch, whose row its end updates).
    audited: bool = False


Action = Callable[..., Done]


def action(name: str, perm: str, must_exist: bool = True) -> Callable[[Action], View]:
    """Make an action view: POST only, login, `perm`, the queue known (404,
    nothing written, unless `must_exist` is off), not read-only, one audit
    entry whatever happens, and a response fit for htmx or a form.

    The wrapped function gets (request, ref, *url args) and returns Done or
    raises ActionError / BadInput / a queue or worker error."""

    def decorate(func: Action) -> View:
        @wraps(func)
        def view(
            request: HttpRequest, prefix: str, name_: str, *args: Any, **kwargs: Any
        ) -> HttpResponse:
            if request.method != "POST":
                return HttpResponse(status=405, headers={"Allow": "POST"})
            if not request.user.is_authenticated:
                return to_login(request)
            try:
                ref = queue_ref(prefix, name_, must_exist=False)
            except Http404 as exc:
                return not_found(request, str(exc))
            target = ":".join([ref.key, *map(str, args), *map(str, kwargs.values())])
            if not request.user.has_perm(perm):
                audit.record(request, target, name, "denied", f"missing {perm}")
                return forbidden(request, f"You need the {perm} permission.")
            if is_read_only(ref):
                audit.record(request, target, name, "denied", "queue is read-only")
                return forbidden(request, f"{ref.key} is read-only here.")
            try:
                if must_exist:  # checked here: Redis being down is audited
                    queue_ref(prefix, name_)
                done = func(request, ref, *args, **kwargs)
            except Http404 as exc:
                return not_found(request, str(exc))
            except BadInput as exc:
                return _failed(request, target, name, str(exc), 400)
            except Exception as exc:
                if recoverable(exc):  # unreachable, or refusing for a while
                    detail = f"Redis unavailable: {describe(exc)}"
                    audit.record(request, target, name, "error", detail)
                    return redis_unavailable(request, exc, acted=True)
                if isinstance(
                    exc, (ActionError, QueueError, GpuWorkerError, ValueError)
                ):
                    return _failed(request, target, name, str(exc), 409)
                raise
            if not done.audited:
                audit.record(request, target, name, "ok", done.detail or done.message)
            return _succeeded(request, done)

        return view

    return decorate


def gpu_action(name: str, perm: str) -> Callable[[Action], View]:
    """`action` for what belongs to a GPU, not a queue (pins): POST only,
    login, `perm`, one audit entry (target `gpu:<uuid>`) whatever happens.
    The wrapped function gets (request, gpu) and returns Done or raises
    BadInput / ActionError / a worker error."""

    def decorate(func: Action) -> View:
        @wraps(func)
        def view(request: HttpRequest) -> HttpResponse:
            if request.method != "POST":
                return HttpResponse(status=405, headers={"Allow": "POST"})
            if not request.user.is_authenticated:
                return to_login(request)
            gpu = request.POST.get("gpu", "").strip()
            target = f"gpu:{gpu[:200]}"
            if not request.user.has_perm(perm):
                audit.record(request, target, name, "denied", f"missing {perm}")
                return forbidden(request, f"You need the {perm} permission.")
            try:
                done = func(request, gpu)
            except BadInput as exc:
                return _failed(request, target, name, str(exc), 400)
            except Exception as exc:
                if recoverable(exc):
                    detail = f"Redis unavailable: {describe(exc)}"
                    audit.record(request, target, name, "error", detail)
                    return redis_unavailable(request, exc, acted=True)
                if isinstance(exc, (ActionError, GpuWorkerError)):
                    return _failed(request, target, name, str(exc), 409)
                raise
            audit.record(request, target, name, "ok", done.detail or done.message)
            return _succeeded(request, done)

        return view

    return decorate


def _failed(
    request: HttpRequest, target: str, name: str, message: str, status: int
) -> HttpResponse:
    audit.record(request, target, name, "error", message)
    if is_htmx(request):
        return render(
            request,
            "dashboard/_flash.html",
            {"level": "error", "message": message},
            status=status,
        )
    messages.error(request, message)
    return HttpResponseRedirect(_back(request), status=303)


def _succeeded(request: HttpRequest, done: Done) -> HttpResponse:
    if done.reload:
        done.redirect = _back(request)
    if is_htmx(request):
        if done.redirect:
            messages.success(request, done.message)
            return HttpResponse(headers={"HX-Redirect": done.redirect})
        response = render(
            request, "dashboard/_flash.html", {"level": "ok", "message": done.message}
        )
        response["HX-Trigger"] = "bullpen:changed"
        return response
    messages.success(request, done.message)
    return HttpResponseRedirect(done.redirect or _back(request), status=303)


def _back(request: HttpRequest) -> str:
    """Where a plain form returns: its `next` field when it is ours, else the
    page the action belongs to."""
    nxt = request.POST.get("next", "")
    if nxt and url_has_allowed_host_and_scheme(
        nxt, {request.get_host()}, request.is_secure()
    ):
        return nxt
    return request.path.split("/actions/")[0] + "/"
