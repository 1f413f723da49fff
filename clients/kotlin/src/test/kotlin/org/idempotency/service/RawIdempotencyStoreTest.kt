package org.idempotency.service

import kotlinx.serialization.json.JsonNull
import org.idempotency.core.IdempotencyError
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.IdempotencyOutcome.FreshAttempt
import org.idempotency.core.IdempotencyOutcome.InFlight
import org.idempotency.core.IdempotencyOutcome.Mismatch
import org.idempotency.core.IdempotencyOutcome.PriorError
import org.idempotency.core.IdempotencyOutcome.PriorResult
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.core.ConsumerNamespace
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.security.MessageDigest
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.milliseconds

/** Every outcome round-trips against a real server, in the caller's transaction. */
class RawIdempotencyStoreTest : StoreTestBase() {
    private val request = json("""{"amount": 100, "currency": "EUR"}""")

    @Test
    fun `FreshAttempt claims the key in the caller's transaction`() {
        val key = newKey()
        db.app().use { c ->
            val fresh = factory.inTransaction(c).getOrThrow().begin(key, request).getOrThrow() as FreshAttempt
            assertEquals(1, fresh.attempt)
            assertFalse(fresh.takeover)
            assertTrue(fresh.fence!! >= 1L shl 32, "fence ${fresh.fence}")
            // Another transaction sees the key held, not free.
            val state = db.query("SELECT state FROM idempotency.idem_key_state('${db.namespace}', '${key.value}')").single()
            assertTrue(state == "in_flight" || state == "held", "state $state")
            c.rollback()
        }
        assertEquals(listOf("absent"), db.query("SELECT state FROM idempotency.idem_key_state('${db.namespace}', '${key.value}')"))
    }

    @Test
    fun `PriorResult after commit`() {
        val key = newKey()
        val result = json("""{"payment_id": 7, "amounts": [1.50, 1e2]}""")
        inTx { s, _ ->
            assertTrue(s.begin(key, request).getOrThrow() is FreshAttempt)
            s.commit(key, result).getOrThrow()
        }
        assertEquals(listOf("committed"), db.query("SELECT status FROM ${db.store} WHERE key_value = '${key.value}'"))
        // The same request in another key order is the same request.
        val replay = inTx { s, _ -> s.begin(key, json("""{"currency": "EUR", "amount": 100}""")).getOrThrow() }
        assertEquals(PriorResult(json("""{"payment_id": 7, "amounts": [1.50, 100]}""")), replay)
    }

    @Test
    fun `PriorError after failPermanent, replayed through the codec`() {
        val known = newKey()
        val unknown = newKey()
        inTx { s, _ ->
            s.begin(known, request).getOrThrow()
            s.failPermanent(known, IdempotencyError.Invocation.GeneralValidation("amount must be positive")).getOrThrow()
            s.begin(unknown, request).getOrThrow()
            s.failPermanent(unknown, IdempotencyError.Recorded("InsufficientFunds", "balance too low", "account 42")).getOrThrow()
        }
        inTx { s, _ ->
            val a = s.begin(known, request).getOrThrow() as PriorError
            assertTrue(a.error is IdempotencyError.Invocation.GeneralValidation)
            assertEquals("amount must be positive", a.error.message)
            // An unknown tag replays as an implementation error with the original message.
            val b = s.begin(unknown, request).getOrThrow() as PriorError
            assertTrue(b.error is IdempotencyError.Internal.Implementation, "${b.error}")
            assertEquals("balance too low", b.error.message)
            assertEquals("InsufficientFunds", b.stored.classTag)
            assertEquals("account 42", b.stored.cause)
        }
    }

    @Test
    fun `Mismatch on another request, with the recorded request and content-equal hashes`() {
        val key = newKey()
        inTx { s, _ -> s.begin(key, request).getOrThrow(); s.commit(key, json("{}")).getOrThrow() }
        val other = json("""{"amount": 101, "currency": "EUR"}""")
        val (m1, m2) = inTx { s, _ -> s.begin(key, other).getOrThrow() as Mismatch to s.begin(key, other).getOrThrow() as Mismatch }
        assertEquals(request, m1.recordedRequest)
        assertTrue(m1.requestRecorded)
        val sha = { t: String -> MessageDigest.getInstance("SHA-256").digest(t.toByteArray()) }
        assertArrayEquals(sha("""{"amount":100,"currency":"EUR"}"""), m1.recordedHash)
        assertArrayEquals(sha("""{"amount":101,"currency":"EUR"}"""), m1.submittedHash)
        assertNotSame(m1.recordedHash, m2.recordedHash)
        assertEquals(m1, m2)
        assertEquals(m1.hashCode(), m2.hashCode())
        // The record is never overwritten.
        assertEquals(PriorResult(json("{}")), inTx { s, _ -> s.begin(key, request).getOrThrow() })
    }

    @Test
    fun `InFlight while another transaction holds the key`() {
        val key = newKey()
        db.app().use { holder ->
            assertTrue(factory.inTransaction(holder).getOrThrow().begin(key, request).getOrThrow() is FreshAttempt)
            val second = inTx { s, _ -> s.begin(key, request).getOrThrow() }
            assertTrue(second is InFlight, "$second")
            holder.rollback()
        }
        assertTrue(inTx { s, _ -> s.begin(key, request).getOrThrow().also { s.failTransient(key).getOrThrow() } } is FreshAttempt)
    }

    @Test
    fun `failTransient forgets the attempt, so the next begin is fresh`() {
        val key = newKey()
        inTx { s, _ ->
            s.begin(key, request).getOrThrow()
            s.failTransient(key).getOrThrow()
        }
        assertEquals(emptyList<String>(), db.query("SELECT status FROM ${db.store} WHERE key_value = '${key.value}'"))
        val again = inTx { s, _ -> s.begin(key, request).getOrThrow().also { s.commit(key, JsonNull).getOrThrow() } }
        assertEquals(1, (again as FreshAttempt).attempt)
    }

    @Test
    fun `purgeExpired deletes expired records and counts them`() {
        val short = IdempotencyStoreFactory(db.store, db.namespace, 1.milliseconds)
        db.app().use { c ->
            val s = short.inTransaction(c).getOrThrow()
            repeat(3) { val k = newKey(); s.begin(k, request).getOrThrow(); s.commit(k, json("1")).getOrThrow() }
            val live = newKey()
            factory.inConnection(c).run { begin(live, request).getOrThrow(); commit(live, json("2")).getOrThrow() }
            c.commit()
        }
        Thread.sleep(20)
        assertEquals(3, inTx { s, _ -> s.purgeExpired().getOrThrow() })
        assertEquals(listOf("1"), db.query("SELECT count(*) FROM ${db.store}"))
        assertEquals(0, inTx { s, _ -> s.purgeExpired(100, 1).getOrThrow() })
    }

    @Test
    fun `purgeExpired without EXECUTE keeps the server's SQLSTATE`() {
        db.execute("REVOKE EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) FROM ${db.appRole}")
        try {
            db.app().use { c -> assertSqlState("42501", factory.inTransaction(c).getOrThrow().purgeExpired()); c.rollback() }
        } finally {
            db.execute("GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO ${db.appRole}")
        }
    }

    @Test
    fun `server errors keep SQLSTATE, message, detail and hint`() {
        val key = newKey()
        val e = db.app().use { c -> serverError(factory.inTransaction(c).getOrThrow().commit(key, json("1"))) }
        assertEquals("55000", e.sqlState)
        assertEquals("cannot commit an idempotency record that is not in progress", e.serverMessage)
        assertTrue(e.detail!!.startsWith("No record exists for key sha256:"), e.detail)
        assertTrue(e.message!!.contains("SQLSTATE 55000") && e.message!!.contains("Detail: No record exists"), e.message)
    }

    @Test
    fun `a key of another namespace is GeneralValidation`() {
        val foreign = IdempotencyKeyMinter(ConsumerNamespace("elsewhere")).mint("x").getOrThrow()
        val r = db.app().use { c -> factory.inTransaction(c).getOrThrow().begin(foreign, request) }
        val e = r.exceptionOrNull() as IdempotencyError.Invocation.GeneralValidation
        assertEquals("The key was made for namespace \"elsewhere\"; this store serves \"orders\".", e.detail)
    }

    @Test
    fun `the first use checks the store the factory names`() {
        val missing = IdempotencyStoreFactory("public.no_such_store", db.namespace, 1.hours)
        val e = db.app().use { c -> missing.inTransaction(c).getOrThrow().begin(newKey(), request).exceptionOrNull() }
        assertTrue(e is IdempotencyError.Internal.Implementation && e.message!!.contains("does not exist"), "$e")
        // A role that may read idem_namespaces is also told when the namespace is bound elsewhere.
        db.execute("SELECT idempotency.idem_create_store('public.other_store')")
        val elsewhere = IdempotencyStoreFactory("public.other_store", db.namespace, 1.hours)
        val f = db.admin().use { c ->
            c.autoCommit = false
            elsewhere.inTransaction(c).getOrThrow().begin(newKey(), request).exceptionOrNull().also { c.rollback() }
        }
        assertTrue(f is IdempotencyError.Internal.Implementation && f.message!!.contains("is bound to idempotency_record, not to public.other_store"), "$f")
    }
}
