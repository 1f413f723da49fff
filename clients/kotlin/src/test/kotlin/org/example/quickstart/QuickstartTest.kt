package org.example.quickstart

import org.idempotency.Kat
import org.idempotency.service.IdempotencyStoreHarness
import org.jetbrains.exposed.v1.jdbc.Database
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.io.File

/** docs/quickstart.md's Kotlin tab: its SQL and its handler, as written, against a client that retries. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class QuickstartTest {
    private val guide = File(Kat.root, "docs/quickstart.md").readText()
    private lateinit var db: IdempotencyStoreHarness
    private lateinit var exposed: Database

    /** The code block after <!-- quickstart: name -->. */
    private fun block(name: String): String {
        val match = Regex("<!-- quickstart: ${Regex.escape(name)} -->\n```[a-z]*\n(.*?)```", RegexOption.DOT_MATCHES_ALL).find(guide)
        return requireNotNull(match) { "docs/quickstart.md has no block after <!-- quickstart: $name -->" }.groupValues[1]
    }

    @BeforeAll
    fun start() {
        // A database without the extension, then the guide's SQL: the extension and its table, the store.
        db = IdempotencyStoreHarness(namespace = payments, store = "public.payment_keys", migrate = false, extensionVersion = null)
        db.execute(block("schema"))
        db.execute(block("kotlin-store"))
        // What the guide's role block grants payments_app, granted to this test's role.
        db.execute("GRANT SELECT, INSERT ON payments TO ${db.appRole}; GRANT USAGE ON SEQUENCE payments_id_seq TO ${db.appRole}; " +
            "SELECT idempotency.idem_grant('payments', '${db.appRole}')")
        exposed = db.exposed()
    }

    @AfterAll
    fun stop() = db.close()

    @Test
    fun `the guide's Kotlin block is Payments_kt`() {
        val source = File(Kat.root, "clients/kotlin/src/test/kotlin/org/example/quickstart/Payments.kt").readText()
        assertEquals("package org.example.quickstart\n\n" + block("kotlin"), source, "docs/quickstart.md's Kotlin block differs from Payments.kt")
    }

    @Test
    fun `a payment is made once, its retry replayed, its key kept for it`() {
        val first = pay(exposed, "7d1c-44a0", Charge(100, "EUR"))
        assertEquals(201, first.status, first.body)
        assertEquals(first, pay(exposed, " 7d1c-44a0\t", Charge(100, "EUR")))
        assertEquals(Reply(422, "this key was used for another request"), pay(exposed, "7d1c-44a0", Charge(99, "EUR")))
        assertEquals(400, pay(exposed, null, Charge(100, "EUR")).status)
        assertEquals(Reply(422, "amount must be positive"), pay(exposed, "b9e0-0001", Charge(0, "EUR")))
        assertEquals(Reply(422, "amount must be positive"), pay(exposed, "b9e0-0001", Charge(0, "EUR")))
        assertEquals(listOf("1"), db.query("SELECT count(*) FROM payments"))
        assertTrue(db.query("SELECT status FROM public.payment_keys ORDER BY status").containsAll(listOf("committed", "failed")))
    }
}
