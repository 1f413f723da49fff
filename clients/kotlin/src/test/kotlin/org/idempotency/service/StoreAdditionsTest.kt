package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.serializer
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyError
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.IdempotencyOutcome.FreshAttempt
import org.idempotency.core.IdempotencyOutcome.InFlight
import org.idempotency.core.IdempotencyOutcome.Mismatch
import org.idempotency.core.IdempotencyOutcome.PriorResult
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import java.util.UUID
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.seconds

/** What the store adds beyond the specification: leases, heartbeats, recovery points, batches, fingerprint pointers, HTTP. */
class StoreAdditionsTest : StoreTestBase() {
    private val jobs = ConsumerNamespace("jobs")
    private val traced = ConsumerNamespace("traced")
    private lateinit var jobsFactory: IdempotencyStoreFactory
    private lateinit var tracedFactory: IdempotencyStoreFactory

    @BeforeAll
    fun namespaces() {
        db.admin().use { c ->
            IdempotencyAdmin.configureNamespace(c, jobs, inProgressLease = 1.seconds)
            for (ns in listOf(jobs, traced)) {
                IdempotencyAdmin.bindStore(c, ns, db.store)
                assertTrue(IdempotencyAdmin.grant(c, ns, db.appRole))
            }
            IdempotencyAdmin.ignoreInFingerprint(c, traced, listOf("/trace_id"))
        }
        jobsFactory = IdempotencyStoreFactory(db.store, jobs, 1.hours)
        tracedFactory = IdempotencyStoreFactory(db.store, traced, 1.hours)
    }

    private fun <T> jobsTx(block: (RawIdempotencyStore) -> T): T = committed { c -> block(jobsFactory.inTransaction(c).getOrThrow()) }

    @Test
    fun `a lease, its heartbeats and a recovery point, answered by a takeover`() {
        val key = IdempotencyKeyMinter(jobs).mint("export", UUID.randomUUID().toString()).getOrThrow()
        val request = json("""{"export": "2026-11"}""")
        // The claim outlives its transaction under the namespace's lease.
        val first = jobsTx { it.begin(key, request).getOrThrow() } as FreshAttempt
        val fence = first.fence!!
        assertNotNull(first.leaseEndsAt)
        // A heartbeat in a transaction of its own names the claim by its fence.
        val noFence = jobsTx { it.extendLease(key) }.exceptionOrNull()
        assertTrue(noFence is IdempotencyError.Internal.Implementation && noFence.message!!.contains("fence"), "$noFence")
        val extended = jobsTx { it.extendLease(key, fence).getOrThrow() }
        assertTrue(!extended.isBefore(first.leaseEndsAt), "$extended")
        jobsTx { it.savePoint(key, "charged", json("""{"charge_id": "ch_1"}"""), fence).getOrThrow() }
        // While the lease runs, a retry is told to wait, until when.
        val waiting = jobsTx { s -> s.begin(key, request).getOrThrow() } as InFlight
        assertNotNull(waiting.leaseEndsAt)
        assertNotNull(waiting.age)
        val busy = jobsTx { it.httpResponse(waiting, retryAfterSeconds = 30).getOrThrow() }
        assertEquals(409, busy.status)
        assertTrue(busy.headers.getValue("Retry-After").toInt() in 1..2, "${busy.headers}")
        Thread.sleep(1200)
        // The holder is gone: a retry takes the claim over and sees how far it got.
        db.app().use { c ->
            val s = jobsFactory.inTransaction(c).getOrThrow()
            val taken = s.begin(key, request).getOrThrow() as FreshAttempt
            assertTrue(taken.takeover)
            assertEquals(2, taken.attempt)
            assertEquals("charged", taken.recoveryPoint)
            assertEquals(json("""{"charge_id": "ch_1"}"""), taken.recoveryState)
            assertTrue(taken.fence != fence)
            // Work with effects is never forgotten as transient.
            assertSqlState("55000", s.failTransient(key))
            c.rollback()
        }
        val done = jobsTx { s -> (s.begin(key, request).getOrThrow() as FreshAttempt).also { s.commit(key, json("\"exported\"")).getOrThrow() } }
        assertTrue(done.takeover)
        // The old holder's fence finishes nothing now.
        assertSqlState("55000", jobsTx { it.extendLease(key, fence) })
        assertEquals(PriorResult(json("\"exported\"")), jobsTx { it.begin(key, request).getOrThrow() })
    }

    @Test
    fun `a batch answers each key in order`() {
        val (a, b, c) = List(3) { newKey() }
        inTx { s, _ -> s.begin(a, json("1")).getOrThrow(); s.commit(a, json("\"one\"")).getOrThrow() }
        inTx { s, _ -> s.begin(c, json("3")).getOrThrow(); s.commit(c, json("\"three\"")).getOrThrow() }
        val outcomes = inTx { s, _ ->
            s.beginBatch(listOf(c to json("33"), b to json("2"), a to json("1"), b to json("2"))).getOrThrow().also {
                s.commit(b, json("\"two\"")).getOrThrow()
            }
        }
        assertEquals(listOf("mismatch", "fresh", "prior_result", "in_flight"), outcomes.map { it.kind })
        assertEquals(json("\"one\""), (outcomes[2] as PriorResult).value)
        assertEquals(PriorResult(json("\"two\"")), inTx { s, _ -> s.begin(b, json("2")).getOrThrow() })
    }

    @Test
    fun `the namespace's fingerprint ignores the parts it names`() {
        val key = IdempotencyKeyMinter(traced).mint(UUID.randomUUID().toString()).getOrThrow()
        committed { c ->
            val s = tracedFactory.inTransaction(c).getOrThrow()
            s.begin(key, json("""{"amount": 5, "trace_id": "a"}""")).getOrThrow()
            s.commit(key, json("\"paid\"")).getOrThrow()
        }
        committed { c ->
            val s = tracedFactory.inTransaction(c).getOrThrow()
            assertEquals(PriorResult(json("\"paid\"")), s.begin(key, json("""{"amount": 5, "trace_id": "b"}""")).getOrThrow())
            assertTrue(s.begin(key, json("""{"amount": 6, "trace_id": "a"}""")).getOrThrow() is Mismatch)
            assertEquals("{\"amount\":5}", CanonicalJson.canonicalUtf8(c, json("""{"trace_id": "b", "amount": 5}"""), listOf("/trace_id")).decodeToString())
        }
    }

    @Test
    fun `HTTP answers come from idem_http_response and idem_http_key`() {
        val key = newKey()
        val request = json("""{"method": "POST", "target": "/payments", "body": {"amount": 5}}""")
        val created = IdempotencyHttpResponse(201, mapOf("Content-Type" to "application/json", "Location" to "/payments/7"), json("""{"payment_id": 7}"""))
        inTx { s, _ ->
            val typed = s.typedAs<JsonObject, IdempotencyHttpResponse>()
            typed.begin(key, request as JsonObject).getOrThrow()
            typed.commit(key, created).getOrThrow()
        }
        inTx { s, _ ->
            val typed = s.typedAs<JsonObject, IdempotencyHttpResponse>()
            val replay = typed.begin(key, request as JsonObject).getOrThrow()
            assertEquals(created, (replay as TypedIdempotencyOutcome.PriorResult).value)
            val answer = typed.httpResponse(replay).getOrThrow()
            assertEquals(201, answer.status)
            assertEquals(created.headers + ("Idempotency-Replayed" to "true"), answer.headers)
            assertEquals(created.body, answer.body)
            val reused = s.httpResponse(s.begin(key, json("""{"method": "POST", "target": "/refunds", "body": {"amount": 5}}""")).getOrThrow(), 1, "https://example.com/idem").getOrThrow()
            assertEquals(422, reused.status)
            assertEquals("IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST", reused.body!!.jsonObject["code"]!!.jsonPrimitive.content)
            assertEquals("<https://example.com/idem>; rel=\"describedby\"", reused.headers["Link"])
            assertFalse(reused.body.toString().contains("/payments"), "never the recorded request")
        }
        val failed = newKey()
        inTx { s, _ -> s.begin(failed, json("{}")).getOrThrow(); s.failPermanent(failed, IdempotencyError.Recorded("CARD_DECLINED", "the card was declined")).getOrThrow() }
        val refused = inTx { s, _ -> s.httpResponse(s.begin(failed, json("{}")).getOrThrow()).getOrThrow() }
        assertEquals(422, refused.status)
        assertEquals("CARD_DECLINED", refused.body!!.jsonObject["code"]!!.jsonPrimitive.content)
        assertEquals("the card was declined", refused.body.jsonObject["detail"]!!.jsonPrimitive.content)
        db.app().use { holder ->
            val held = newKey()
            factory.inTransaction(holder).getOrThrow().begin(held, json("{}")).getOrThrow()
            val busy = inTx { s, _ -> s.httpResponse(s.begin(held, json("{}")).getOrThrow(), retryAfterSeconds = 3).getOrThrow() }
            assertEquals(409, busy.status)
            assertEquals("3", busy.headers["Retry-After"])
            holder.rollback()
        }
        val fresh = inTx { s, _ -> s.httpResponse(FreshAttempt(null, 1, false, null, null, null)) }
        assertSqlState("22023", fresh)
        // The header: quoted and bare are one key; missing and malformed are the 400 to answer.
        db.app().use { c ->
            val s = factory.inConnection(c)
            assertEquals(IdempotencyHttpKey.Accepted(s.httpKey("abc").getOrThrow().let { (it as IdempotencyHttpKey.Accepted).key }), s.httpKey("\"abc\"").getOrThrow())
            assertEquals("abc", (s.httpKey(" \"abc\" ").getOrThrow() as IdempotencyHttpKey.Accepted).key.value)
            val missing = (s.httpKey(null).getOrThrow() as IdempotencyHttpKey.Refused).response
            assertEquals(400, missing.status)
            assertEquals("MISSING_IDEMPOTENCY_KEY", missing.body!!.jsonObject["code"]!!.jsonPrimitive.content)
            val bad = (s.httpKey("\"abc").getOrThrow() as IdempotencyHttpKey.Refused).response
            assertEquals("INVALID_IDEMPOTENCY_KEY", bad.body!!.jsonObject["code"]!!.jsonPrimitive.content)
            c.rollback()
        }
    }

    @Test
    fun `outcomes are serializable with a stable kind, and no recorded request on the wire`() {
        val key = newKey()
        inTx { s, _ -> s.begin(key, json("""{"secret": "card 4242"}""")).getOrThrow(); s.commit(key, json("""{"paymentId": 7, "amount": 100}""")).getOrThrow() }
        val (replay, mismatch) = inTx { s, _ ->
            s.begin(key, json("""{"secret": "card 4242"}""")).getOrThrow() to s.begin(key, json("""{"secret": "other"}""")).getOrThrow()
        }
        val wire = Json.encodeToString(IdempotencyOutcome.serializer(), mismatch)
        assertEquals("mismatch", Json.parseToJsonElement(wire).jsonObject["kind"]!!.jsonPrimitive.content)
        assertFalse(wire.contains("4242"), wire)
        val back = Json.decodeFromString(IdempotencyOutcome.serializer(), wire) as Mismatch
        assertEquals((mismatch as Mismatch).recordedHash.toList(), back.recordedHash.toList())
        assertFalse(back.requestRecorded)
        // jsonb keeps its own key order: the raw result comes back as the server prints it.
        assertEquals("""{"kind":"prior_result","result":{"amount":100,"paymentId":7}}""", Json.encodeToString(IdempotencyOutcome.serializer(), replay))
        val fresh = FreshAttempt(1L shl 40, 2, true, null, "charged", json("""{"charge_id": "ch_1"}"""))
        val freshWire = Json.encodeToString(IdempotencyOutcome.serializer(), fresh)
        assertEquals("""{"kind":"fresh","attempt":2,"takeover":true,"recovery_point":"charged"}""", freshWire)
        assertNull((Json.decodeFromString(IdempotencyOutcome.serializer(), freshWire) as FreshAttempt).fence)
        // The typed outcome: the result as its type, found by the serializer lookup.
        val typed = inTx { s, _ -> s.typedAs<JsonObject, Receipt>().begin(key, json("""{"secret": "card 4242"}""") as JsonObject).getOrThrow() }
        val ser = serializer<TypedIdempotencyOutcome<JsonObject, Receipt>>()
        val text = Json.encodeToString(ser, typed)
        assertEquals("""{"kind":"prior_result","result":{"paymentId":7,"amount":100}}""", text)
        assertEquals(typed, Json.decodeFromString(ser, text))
        val inFlight = InFlight(java.time.Duration.ofMillis(1500), null)
        assertEquals("""{"kind":"in_flight","age":1.5}""", Json.encodeToString(IdempotencyOutcome.serializer(), inFlight))
        assertEquals(inFlight, Json.decodeFromString(IdempotencyOutcome.serializer(), """{"kind":"in_flight","age":1.5}"""))
        assertEquals(JsonPrimitive("prior_error"), Json.encodeToJsonElement(IdempotencyOutcome.serializer(),
            IdempotencyOutcome.PriorError(RuntimeException("x"), org.idempotency.core.StoredAppError("T", "m"))).jsonObject["kind"])
    }
}
