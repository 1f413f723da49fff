package org.idempotency.service

import org.idempotency.core.IdempotencyError
import org.idempotency.core.IdempotencyOutcome.FreshAttempt
import org.idempotency.core.IdempotencyOutcome.PriorResult
import org.jetbrains.exposed.v1.jdbc.transactions.transaction
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.sql.Connection

/** The three bindings: the autocommit refusal, Exposed's transaction, and never a commit or rollback of their own. */
class FactoryBindingsTest : StoreTestBase() {
    private val request = json("""{"order": 1}""")

    @BeforeAll
    fun ledger() {
        db.execute("CREATE TABLE ledger (entry text NOT NULL); GRANT ALL ON ledger TO ${db.appRole}")
    }

    private fun scalar(c: Connection, sql: String): String? =
        c.createStatement().use { st -> st.executeQuery(sql).use { rs -> rs.next(); rs.getString(1) } }

    @Test
    fun `inTransaction refuses a connection in autocommit mode`() {
        db.app(autoCommit = true).use { c ->
            val e = factory.inTransaction(c).exceptionOrNull()
            assertTrue(e is IdempotencyError.Internal.Implementation && e.message!!.contains("autocommit"), "$e")
            assertTrue(c.autoCommit, "the connection is left as it was")
        }
        db.app().use { c -> assertTrue(factory.inTransaction(c).isSuccess) }
    }

    @Test
    fun `inConnection takes any connection but refuses to begin in autocommit mode`() {
        val key = newKey()
        db.app(autoCommit = true).use { c ->
            val store = factory.inConnection(c)
            val e = store.begin(key, request).exceptionOrNull()
            assertTrue(e is IdempotencyError.Internal.Implementation && e.message!!.contains("autocommit mode"), "$e")
            assertTrue(store.beginBatch(listOf(key to request)).isFailure)
            // Calls that claim nothing run in autocommit mode.
            assertTrue(store.httpKey("\"$key\"").isSuccess)
        }
        // Nothing was claimed.
        assertTrue(inTx { s, _ -> s.begin(key, request).getOrThrow().also { s.failTransient(key).getOrThrow() } } is FreshAttempt)
    }

    @Test
    fun `the store never commits or rolls back the caller's transaction`() {
        val key = newKey()
        db.app().use { c ->
            val txid = scalar(c, "SELECT txid_current()")
            val store = factory.inTransaction(c).getOrThrow()
            store.begin(key, request).getOrThrow()
            c.createStatement().use { it.execute("INSERT INTO ledger VALUES ('paid')") }
            store.commit(key, json("""{"ok": true}""")).getOrThrow()
            assertEquals(txid, scalar(c, "SELECT txid_current()"), "still the caller's transaction")
            assertEquals(emptyList<String>(), db.query("SELECT status FROM ${db.store} WHERE key_value = '${key.value}'"))
            c.rollback()
        }
        assertEquals(listOf("0"), db.query("SELECT count(*) FROM ledger"))
        assertTrue(inTx { s, _ -> s.begin(key, request).getOrThrow().also { s.failTransient(key).getOrThrow() } } is FreshAttempt)
    }

    @Test
    fun `withTx works in Exposed's transaction`() {
        val key = newKey()
        val exposed = db.exposed()
        val first = transaction(exposed) {
            val store = factory.withTx(this)
            store.begin(key, request).getOrThrow().also { store.commit(key, json("42")).getOrThrow() }
        }
        assertTrue(first is FreshAttempt)
        assertEquals(PriorResult(json("42")), transaction(exposed) { factory.withTx(this).begin(key, request).getOrThrow() })
    }

    @Test
    fun `Exposed's transaction rolling back takes the fresh attempt with it`() {
        val key = newKey()
        val exposed = db.exposed()
        class Boom : RuntimeException("the work failed")
        assertThrows<Boom> {
            transaction(exposed) {
                assertTrue(factory.withTx(this).begin(key, request).getOrThrow() is FreshAttempt)
                exec("INSERT INTO ledger VALUES ('half done')")
                throw Boom()
            }
        }
        val again = transaction(exposed) {
            factory.withTx(this).begin(key, request).getOrThrow().also { factory.withTx(this).failTransient(key, (it as FreshAttempt).fence).getOrThrow() }
        }
        assertEquals(1, (again as FreshAttempt).attempt)
        assertEquals(listOf("0"), db.query("SELECT count(*) FROM ledger"))
    }
}
