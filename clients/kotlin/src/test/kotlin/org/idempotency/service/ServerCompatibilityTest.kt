package org.idempotency.service

import kotlinx.serialization.json.JsonNull
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyError
import org.idempotency.core.IdempotencyKeyMinter
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import kotlin.time.Duration.Companion.hours

/** The first use asks idem_version() and refuses what this library does not know, saying what to do. */
class ServerCompatibilityTest {
    private val ns = ConsumerNamespace("orders")
    private val key = IdempotencyKeyMinter(ns).mint("k").getOrThrow()

    private fun firstUse(db: IdempotencyStoreHarness): Throwable? = db.admin().use { c ->
        c.autoCommit = false
        IdempotencyStoreFactory(db.store, ns, 1.hours).inTransaction(c).getOrThrow().begin(key, JsonNull).exceptionOrNull().also { c.rollback() }
    }

    private fun assertRefused(e: Throwable?, vararg words: String) {
        assertTrue(e is IdempotencyError.Internal.Implementation && words.all { e.message!!.contains(it) }, "$e")
    }

    @Test
    fun `a release before 1_0_0 is refused with the update it needs`() {
        IdempotencyStoreHarness(migrate = false, extensionVersion = "0.9.2").use { db ->
            assertRefused(firstUse(db), "release 0.9.2", "ALTER EXTENSION idempotency UPDATE")
        }
    }

    @Test
    fun `an API major this library does not know is refused, naming both`() {
        IdempotencyStoreHarness().use { db ->
            db.execute(
                "CREATE OR REPLACE FUNCTION idempotency.idem_version(OUT edition text, OUT version text, OUT api text) " +
                    "LANGUAGE sql AS \$\$ SELECT 'native', '2.0.0', '2.0' \$\$",
            )
            assertRefused(firstUse(db), "API 2.0", "release 2.0.0", "API 1.x")
        }
    }

    @Test
    fun `a store the plain script installed, without an extension, passes the version check`() {
        // The portable edition's plain script makes the schema and idem_version() but no
        // extension (docs/managed.md, route 2): here its idem_version() alone, and no store
        // table yet, so the check goes on past the version to the store it lacks.
        IdempotencyStoreHarness(migrate = false, extensionVersion = null).use { db ->
            db.execute(
                "CREATE SCHEMA idempotency; CREATE FUNCTION idempotency.idem_version(OUT edition text, OUT version text, OUT api text) " +
                    "LANGUAGE sql AS \$\$ SELECT 'portable', '1.0.0', '1.0' \$\$",
            )
            assertRefused(firstUse(db), "store public.idempotency_record does not exist")
        }
    }

    @Test
    fun `a database without the extension is refused`() {
        IdempotencyStoreHarness(migrate = false, extensionVersion = null).use { db ->
            assertRefused(firstUse(db), "not installed", "CREATE EXTENSION idempotency", "docs/managed.md")
        }
    }
}
