"""Job verbs over the API: `POST /queues/{queue}/jobs/{job_id}/{verb}` for
every verb declared in dashboard/shared/verbs.py but Remove and Cancel
(the job's DELETE does those). A verb's parameter is the JSON body, checked
against the schema made from its form (`schemas.verb_request`); a job in a
state the verb does not apply to is a 409 `wrong_job_state`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from dashboard.shared import verbs
from dashboard.shared.verbs import VERBS, Verb
from gpu_workers import Fleet
from queues.exceptions import QueueError

from ...shared import conf
from .. import schemas, store
from ..exceptions import BadRequest, Conflict, NotFound
from ..handling import Call, json_response
from ..operations import operation
from ..validation import read_checked_body
from .common import queue_of

#: The job's DELETE removes it or, running, asks its worker to cancel it.
BY_DELETE = frozenset({"remove", "cancel"})
#: Values read to act on a job by id (its data is left out, unless the
#: verb needs it whole).
_READ_BYTES = 64


def _params(request: HttpRequest, verb: Verb) -> dict[str, Any]:
    """The verb's parameter from the JSON body (none: no body read)."""
    if verb.params is None:
        return {}
    body = read_checked_body(request, schemas.verb_request(verb))
    try:
        return verb.clean(body)
    except ValueError as exc:  # the form's own checks, as on the pages
        raise BadRequest("invalid_body", str(exc)) from None


def _view(verb: Verb) -> Callable[..., HttpResponse]:
    def act(request: HttpRequest, call: Call, queue: str, job_id: str) -> HttpResponse:
        params = _params(request, verb)
        q = queue_of(queue)
        c = conf.get()
        place = verbs.Where(q, Fleet(store.client(), c.namespace))
        try:
            acted = verbs.run_on_job(place, verb, job_id, params, _READ_BYTES)
        except verbs.Refused as exc:
            if exc.code == "gone":
                raise NotFound(
                    "job_not_found", f"queue {queue} has no job {job_id}"
                ) from None
            if exc.code == "state":
                raise Conflict("wrong_job_state", str(exc)) from None
            raise Conflict("action_refused", str(exc)) from None
        except QueueError as exc:  # locked, gone meanwhile...
            raise Conflict("action_refused", str(exc)) from None
        body: dict[str, Any] = {
            "id": job_id,
            "action": verb.name,
            "previous_state": acted.state,
            "message": acted.message,
        }
        if acted.new_id is not None:
            body["new_id"] = acted.new_id
        return json_response(body)

    act.__name__ = act.__qualname__ = f"{verb.name}_job"
    act.__doc__ = verb.doc
    return act


def _register(verb: Verb) -> None:
    operation(
        method="POST",
        path=f"/queues/{{queue}}/jobs/{{job_id}}/{verb.name}",
        operation_id=schemas.verb_id(verb) + "Job",
        summary=verb.doc,
        description=f"{verb.label}: offered for a job that is "
        + ", ".join(sorted(verb.states - {"unknown"}))
        + "; a job in another state is a 409 (wrong_job_state) and is left alone.",
        scope="write",
        request_schema=schemas.verb_request_name(verb) if verb.params else None,
        responses={
            200: ("Done", "JobActed"),
            404: ("No such job", None),
            409: ("The job's state does not allow it, or the queue refused", None),
        },
    )(_view(verb))


for _verb in VERBS.values():
    if _verb.name not in BY_DELETE:
        _register(_verb)
