package org.idempotency.service

import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json
import org.idempotency.core.IdempotencyError
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

@Serializable data class Charge(val amount: Long, val currency: String)
@Serializable data class Receipt(val paymentId: Long, val amount: Long)

/** The same types after a deploy that changed them without draining the store. */
@Serializable data class ReceiptV2(val paymentId: Long, val amount: Long, val settledAt: String)
@Serializable data class ChargeV2(val amount: Long, val currency: String, val customer: String)

/** The typed wrapper: round trips, a drifted result type, and the recorded request decoded or its failure carried. */
class IdempotencyStoreTypedTest : StoreTestBase() {
    private val charge = Charge(100, "EUR")
    private val receipt = Receipt(7, 100)

    private fun <T> typed(block: (IdempotencyStore<Charge, Receipt>) -> T): T =
        inTx { raw, _ -> block(raw.typedAs<Charge, Receipt>()) }

    @Test
    fun `typed round trips of every outcome`() {
        val key = newKey()
        val fresh = typed { s -> s.begin(key, charge).getOrThrow().also { s.commit(key, receipt).getOrThrow() } }
        assertTrue(fresh is TypedIdempotencyOutcome.FreshAttempt && fresh.attempt == 1)
        val replay = typed { it.begin(key, charge).getOrThrow() }
        assertEquals(receipt, (replay as TypedIdempotencyOutcome.PriorResult).value)
        val failed = newKey()
        typed { s -> s.begin(failed, charge).getOrThrow(); s.failPermanent(failed, IdempotencyError.Invocation.GeneralValidation("bad card")).getOrThrow() }
        val prior = typed { it.begin(failed, charge).getOrThrow() } as TypedIdempotencyOutcome.PriorError
        assertEquals("bad card", prior.error.message)
        val mismatch = typed { it.begin(key, charge.copy(amount = 5)).getOrThrow() } as TypedIdempotencyOutcome.Mismatch
        assertEquals(charge, mismatch.recordedRequest.getOrThrow())
        db.app().use { holder ->
            val held = newKey()
            factory.typedAs<Charge, Receipt>().inTransaction(holder).getOrThrow().begin(held, charge).getOrThrow()
            assertTrue(typed { it.begin(held, charge).getOrThrow() } is TypedIdempotencyOutcome.InFlight)
            holder.rollback()
        }
    }

    @Test
    fun `a stored result of a drifted type is IncompatibleState`() {
        val key = newKey()
        typed { s -> s.begin(key, charge).getOrThrow(); s.commit(key, receipt).getOrThrow() }
        val result = inTx { raw, _ -> raw.typedAs<Charge, ReceiptV2>().begin(key, charge) }
        val e = result.exceptionOrNull()
        assertTrue(e is IdempotencyError.Internal.IncompatibleState, "$e")
        assertTrue(e!!.message!!.contains("settledAt"), e.message)
        // A Json that tolerates the drift is the service's choice, made at wiring time.
        val lenient = Json { ignoreUnknownKeys = true }
        val older = inTx { raw, _ -> raw.typedAs<Charge, Receipt>(lenient).begin(key, charge).getOrThrow() }
        assertEquals(receipt, (older as TypedIdempotencyOutcome.PriorResult).value)
    }

    @Test
    fun `Mismatch carries the recorded request decoded, or its decode failure`() {
        val key = newKey()
        typed { s -> s.begin(key, charge).getOrThrow(); s.commit(key, receipt).getOrThrow() }
        val m = inTx { raw, _ -> raw.typedAs<ChargeV2, Receipt>().begin(key, ChargeV2(1, "EUR", "c-1")).getOrThrow() }
        m as TypedIdempotencyOutcome.Mismatch
        val failure = m.recordedRequest.exceptionOrNull()
        assertTrue(failure is IdempotencyError.Internal.IncompatibleState, "$failure")
        assertEquals(32, m.recordedHash.size)
    }

    @Test
    fun `the typed factory is made once at wiring time`() {
        val typedFactory = factory.typedAs<Charge, Receipt>()
        val key = newKey()
        db.app().use { c ->
            val s = typedFactory.inTransaction(c).getOrThrow()
            s.begin(key, charge).getOrThrow(); s.commit(key, receipt).getOrThrow(); c.commit()
        }
        db.app().use { c -> assertEquals(receipt, (typedFactory.inConnection(c).begin(key, charge).getOrThrow() as TypedIdempotencyOutcome.PriorResult).value) }
        val batch = db.app().use { c ->
            typedFactory.inConnection(c).beginBatch(listOf(key to charge, newKey() to charge)).getOrThrow().also { c.rollback() }
        }
        assertEquals(listOf("prior_result", "fresh"), batch.map { it.kind })
    }
}
