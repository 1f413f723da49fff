"""client_side.py: the fourth contender, an idempotency store in the style of
an application library. The same table and the same outcomes as the
extension, but validation and the fingerprint run in the client and every
step is its own statement, so each begin costs several round trips.

Used by bench.py: run(scenario, ...) starts `clients` processes that loop for
`duration` seconds and returns (transactions, latencies in ms, outcome
counts). The fresh keys are drawn from a generator seeded by round_no and
the worker, so each run (each round_no) writes keys no other run wrote."""
import hashlib
import json
import multiprocessing
import random
import re
import time

import psycopg
from psycopg.types.json import Jsonb

NAMESPACE = re.compile(r"^[a-z0-9_-]{1,64}$")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
WHITE = " \t\n\r\f\v"


def canonical_hash(value):
    """SHA-256 of canonical JSON: sorted keys, no whitespace, UTF-8."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).digest()


def begin(cur, ns, raw_key, request):
    """The begin of the store: one outcome name, as the extension answers."""
    key = raw_key.strip(WHITE)
    if not NAMESPACE.match(ns):
        raise ValueError("invalid idempotency namespace")
    if not key or len(key) > 255 or CONTROL.search(key):
        raise ValueError("invalid idempotency key")
    digest = canonical_hash(request)
    select = ("SELECT status, request_hash, result_payload, error_payload FROM client.record"
              " WHERE namespace = %s AND key_value = %s")
    # A recorded answer first, without the lock (which would last until
    # commit and make concurrent replays answer in_flight to each other).
    cur.execute(select, (ns, key))
    row = cur.fetchone()
    if row is None:
        cur.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (ns + ":" + key,))
        if not cur.fetchone()[0]:
            return "in_flight"
        cur.execute(
            "INSERT INTO client.record (namespace, key_value, status, request_hash, request_payload,"
            " created_at, updated_at, expires_at) VALUES (%s, %s, 'in_progress', %s, %s, now(), now(),"
            " now() + interval '1 day') ON CONFLICT DO NOTHING RETURNING 1",
            (ns, key, digest, Jsonb(request)))
        if cur.fetchone() is not None:
            return "fresh"
        cur.execute(select, (ns, key))
        row = cur.fetchone()
    status, recorded, _result, _error = row
    if bytes(recorded) != digest:
        return "mismatch"
    return {"committed": "prior_result", "failed": "prior_error"}.get(status, "in_flight")


def commit(cur, ns, key, result):
    cur.execute("UPDATE client.record SET status = 'committed', result_payload = %s, updated_at = now()"
                " WHERE namespace = %s AND key_value = %s AND status = 'in_progress'",
                (Jsonb(result), ns, key))
    if cur.rowcount != 1:
        raise RuntimeError("cannot commit an idempotency record that is not in progress")


def _worker(args):
    scenario, conninfo, duration, ns, nkeys, round_no, request, other, result, worker = args
    # Seeded by run and worker: a seed that repeats in a later run draws the
    # same "fresh" keys, which that run then replays (read-only, no commit
    # to flush) instead of writing.
    rng = random.Random(round_no * 1000 + worker)
    latencies = []
    counts = {}
    with psycopg.connect(conninfo, prepare_threshold=0) as conn:
        cur = conn.cursor()
        deadline = time.perf_counter() + duration
        while True:
            start = time.perf_counter()
            if start >= deadline:
                break
            with conn.transaction():
                if scenario == "fresh":
                    key = str(rng.randrange(1, 9 * 10**18))
                    kind = begin(cur, ns, key, request)
                    if kind == "fresh":
                        commit(cur, ns, key, result)
                elif scenario in ("replay", "mismatch"):
                    key = str(rng.randrange(1, nkeys + 1))
                    kind = begin(cur, ns, key, request if scenario == "replay" else other)
                else:  # contention
                    key = str(round_no * 1000 + rng.randrange(1, 9))
                    kind = begin(cur, ns, key, request)
                    if kind == "fresh":
                        cur.execute("INSERT INTO bench.business VALUES ('client', %s, %s)", (round_no, key))
                        commit(cur, ns, key, result)
                    cur.execute("INSERT INTO bench.tally VALUES ('client', %s, %s)", (round_no, kind))
            latencies.append((time.perf_counter() - start) * 1000.0)
            counts[kind] = counts.get(kind, 0) + 1
    return latencies, counts


def run(scenario, conninfo, clients, duration, ns, nkeys, round_no, request, other, result):
    jobs = [(scenario, conninfo, duration, ns, nkeys, round_no, request, other, result, i) for i in range(clients)]
    with multiprocessing.get_context("fork").Pool(clients) as pool:
        parts = pool.map(_worker, jobs)
    latencies = [x for lat, _ in parts for x in lat]
    counts = {}
    for _, c in parts:
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
    return len(latencies), latencies, counts
