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
