package org.idempotency.service

import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.IdempotencyOutcome.FreshAttempt
import org.idempotency.core.IdempotencyOutcome.InFlight
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.RepeatedTest
import java.util.concurrent.CyclicBarrier
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit

/** Two JVM threads, one key: one FreshAttempt, one InFlight, the loser never waiting for the winner. */
class ConcurrencyTest : StoreTestBase() {
    @RepeatedTest(5)
    fun `two threads begin one key at once`() {
        val key = newKey()
        val request = json("""{"job": 9}""")
        val started = CyclicBarrier(2)
        val answered = CyclicBarrier(2)
        val pool = Executors.newFixedThreadPool(2)
        try {
            val outcomes = (1..2).map {
                pool.submit<IdempotencyOutcome> {
                    db.app().use { c ->
                        val store = factory.inTransaction(c).getOrThrow()
                        started.await(10, TimeUnit.SECONDS)
                        val outcome = store.begin(key, request).getOrThrow()
                        answered.await(10, TimeUnit.SECONDS)   // the winner holds its claim until both have answered
                        if (outcome is FreshAttempt) store.commit(key, json("\"done\"")).getOrThrow()
                        c.commit()
                        outcome
                    }
                }
            }.map { it.get(30, TimeUnit.SECONDS) }
            assertEquals(1, outcomes.count { it is FreshAttempt }, "$outcomes")
            assertEquals(1, outcomes.count { it is InFlight }, "$outcomes")
        } finally {
            pool.shutdownNow()
        }
    }
}
