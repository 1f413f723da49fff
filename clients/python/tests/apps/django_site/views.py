"""Views that write through the ORM: in the transaction that holds the claim."""

from __future__ import annotations

import json
import os
import time
from decimal import Decimal

import httpx
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

import idempotency
from idempotency import IdempotencyError
from idempotency.django import DjangoClaim

from .models import Payment, Shipment

_failed: set[str] = set()


def health(request: HttpRequest) -> HttpResponse:
    """Readiness, for the tests (a GET: not covered)."""
    return JsonResponse({"ok": True})


@csrf_exempt
def create_payment(request: HttpRequest) -> HttpResponse:
    """Inserts a payment; sleeps as long as the X-Sleep header says, or fails once per key."""
    body = json.loads(request.body)
    key = request.idempotency.key  # type: ignore[attr-defined]
    payment = Payment.objects.create(key=key, amount=Decimal(str(body["amount"])))
    time.sleep(float(request.headers.get("X-Sleep", "0")))
    if body.get("fail_once") and key not in _failed:
        _failed.add(key)
        raise RuntimeError("the view failed after its insert")
    response = JsonResponse({"payment_id": payment.id, "amount": str(body["amount"])}, status=201)
    response["Location"] = f"/payments/{payment.id}"
    return response


@csrf_exempt
def refund(request: HttpRequest, payment_id: int) -> HttpResponse:
    """A route with a parameter: its template, not its path, is fingerprinted."""
    row = Payment.objects.create(key=request.idempotency.key, amount=-1)  # type: ignore[attr-defined]
    return JsonResponse({"refund_id": row.id, "payment_id": payment_id}, status=201)


@csrf_exempt
def flaky(request: HttpRequest) -> HttpResponse:
    """Writes, then answers 503 the first time per key."""
    key = request.idempotency.key  # type: ignore[attr-defined]
    Payment.objects.create(key=key, amount=0)
    if key not in _failed:
        _failed.add(key)
        return JsonResponse({"status": "try again"}, status=503)
    return JsonResponse({"status": "done"}, status=201)


@csrf_exempt
def ship(request: HttpRequest) -> HttpResponse:
    """Calls the downstream service with a key minted from the inbound one."""
    key = request.idempotency.key  # type: ignore[attr-defined]
    body = json.loads(request.body)
    downstream_key = idempotency.mint("py-downstream", [key])
    answer = httpx.post(os.environ["DOWNSTREAM_URL"] + "/ship", json=body, headers={"Idempotency-Key": downstream_key})
    answer.raise_for_status()
    if body.get("fail_once") and key not in _failed:
        _failed.add(key)
        raise RuntimeError("the view failed after the downstream call")
    Shipment.objects.create(key=key, downstream_key=downstream_key)
    return JsonResponse({"downstream_key": downstream_key, "tracking": answer.json()["tracking"]}, status=201)


@csrf_exempt
def refuse(request: HttpRequest) -> HttpResponse:
    """Writes, then refuses the request for good (rule 18): below 500 the
    middleware answers the 422 every retry gets instead of this answer."""
    held = request.idempotency  # type: ignore[attr-defined]
    body = json.loads(request.body)
    Payment.objects.create(key=held.key, amount=Decimal(str(body["amount"])))
    held.fail_permanent({"class_tag": "InvalidAmount", "message": "amount must be positive"})
    return JsonResponse({"refused": "by the handler"}, status=body.get("answer", 400))


@csrf_exempt
def release(request: HttpRequest) -> HttpResponse:
    """Writes, then releases the key the first time per key (rule 19): its
    409 is sent, its write rolled back, and the retry runs it again."""
    held = request.idempotency  # type: ignore[attr-defined]
    Payment.objects.create(key=held.key, amount=0)
    if held.key not in _failed:
        _failed.add(held.key)
        held.fail_transient()
        return JsonResponse({"status": "busy"}, status=409)
    return JsonResponse({"status": "done"}, status=201)


def _refused(e: IdempotencyError) -> JsonResponse:
    """An error of the package as the tests read it."""
    return JsonResponse({"sqlstate": e.sqlstate, "message": e.message}, status=409)


@csrf_exempt
def twice(request: HttpRequest) -> HttpResponse:
    """Releases the key, then tries to refuse it too (rule 20): the second call is refused."""
    held = request.idempotency  # type: ignore[attr-defined]
    held.fail_transient()
    try:
        held.fail_permanent({"class_tag": "Twice", "message": "never recorded"})
    except IdempotencyError as e:
        return _refused(e)
    return JsonResponse({"sqlstate": None})


_stash: dict[str, DjangoClaim] = {}


@csrf_exempt
def stash(request: HttpRequest) -> HttpResponse:
    """Keeps its claim past the request, for GET /late."""
    held = request.idempotency  # type: ignore[attr-defined]
    _stash[held.key] = held
    return JsonResponse({"stashed": held.key}, status=201)


def late(request: HttpRequest) -> HttpResponse:
    """Ends a claim whose answer was recorded already (rule 20): refused."""
    held = _stash.pop(request.GET["key"])
    try:
        held.fail_transient()
    except IdempotencyError as e:
        return JsonResponse({"sqlstate": e.sqlstate, "message": e.message})
    return JsonResponse({"sqlstate": None})
