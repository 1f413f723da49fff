package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import org.idempotency.core.IdempotencyKey
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.core.IdempotencyServerException
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.TestInstance
import java.sql.Connection
import java.util.UUID
import kotlin.time.Duration.Companion.hours

/** A harness per test class, a clean store per test, and the service's factory. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class StoreTestBase {
    lateinit var db: IdempotencyStoreHarness
    lateinit var factory: IdempotencyStoreFactory

    @BeforeAll
    fun startHarness() {
        db = IdempotencyStoreHarness()
        factory = IdempotencyStoreFactory(db.store, db.namespace, 24.hours)
    }

    @AfterAll
    fun stopHarness() = db.close()

    @BeforeEach
    fun cleanStore() { db.clean() }

    /** A key of the harness's namespace, new to this test. */
    fun newKey(): IdempotencyKey = IdempotencyKeyMinter(db.namespace).mint(UUID.randomUUID().toString()).getOrThrow()

    fun json(text: String): JsonElement = Json.parseToJsonElement(text)

    /** Runs [block] on a new app connection in a transaction, then commits. */
    fun <T> committed(block: (Connection) -> T): T = db.app().use { c -> block(c).also { c.commit() } }

    /** The raw store in a new transaction of the app role. */
    fun <T> inTx(block: (RawIdempotencyStore, Connection) -> T): T =
        committed { c -> block(factory.inTransaction(c).getOrThrow(), c) }

    /** The server error a failure carries. */
    fun serverError(result: Result<*>): IdempotencyServerException =
        result.exceptionOrNull() as? IdempotencyServerException ?: error("expected a server error, got $result")

    fun assertSqlState(expected: String, result: Result<*>) = assertEquals(expected, serverError(result).sqlState, "$result")
}
