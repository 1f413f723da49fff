package org.example.payments

import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.DefaultIdempotencyErrorCodec
import org.idempotency.core.IdempotencyErrors
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.service.IdempotencyStoreFactory
import org.idempotency.service.IdempotencyStoreHarness
import org.jetbrains.exposed.v1.jdbc.Database
import org.jetbrains.exposed.v1.jdbc.transactions.transaction
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import kotlin.time.Duration.Companion.hours

/** The handler written for the specification's API runs unchanged against the store. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class PaymentHandlerTest {
    private lateinit var db: IdempotencyStoreHarness
    private lateinit var exposed: Database
    private val charges = mutableListOf<String>()
    private var balance = 1_000L
    private var unavailable = false
    private lateinit var handler: PaymentHandler

    private val provider = object : PaymentProvider {
        override fun charge(idempotencyKey: String, amount: Long): Boolean {
            if (unavailable) throw ProviderUnavailable()
            if (amount > balance) return false
            charges += idempotencyKey
            return true
        }
    }

    @BeforeAll
    fun start() {
        db = IdempotencyStoreHarness(namespace = ConsumerNamespace("payments"))
        db.execute("CREATE TABLE payments (id bigserial PRIMARY KEY, amount bigint NOT NULL); " +
            "GRANT ALL ON payments, payments_id_seq TO ${db.appRole}")
        exposed = db.exposed()
        handler = PaymentsWiring.handler(db.store, provider)
    }

    @AfterAll
    fun stop() {
        IdempotencyErrors.codec = DefaultIdempotencyErrorCodec
        db.close()
    }

    @BeforeEach
    fun clean() {
        db.clean(); db.execute("TRUNCATE payments"); charges.clear(); balance = 1_000; unavailable = false
    }

    private fun post(header: String?, request: PaymentRequest) = transaction(exposed) { handler.handle(this, header, request) }

    @Test
    fun `a payment is made once and replayed`() {
        val request = PaymentRequest("tenant-42", "invoice-1001", 100)
        val first = post("\t8e03978e-40d5 ", request)
        assertEquals(201, first.status, first.body)
        val again = post("8e03978e-40d5", request)
        assertEquals(Reply(200, first.body), again)
        assertEquals(listOf(IdempotencyKeyMinter(ConsumerNamespace("payments")).mint("tenant-42", "invoice-1001").getOrThrow().value), charges)
        assertEquals(listOf("1"), db.query("SELECT count(*) FROM payments"))
        assertTrue(first.body.contains("411180648d81357fd33e55d40a80bfdbf76b8a6f9902b5ec280f19b32b2dc8ae"), first.body)
    }

    @Test
    fun `header problems are the service's own GeneralValidation`() {
        val request = PaymentRequest("t", "i", 1)
        assertEquals(Reply(400, "an Idempotency-Key header is required"), post(null, request))
        assertEquals(Reply(400, "invalid idempotency key: The key contains control character U+000A at position 6."), post("order\n1001", request))
    }

    @Test
    fun `a permanent error is recorded and replayed as the service's AppError`() {
        val request = PaymentRequest("t", "big", 5_000)
        assertEquals(Reply(422, "InsufficientFunds: balance too low for 5000"), post("k-1", request))
        balance = 10_000
        assertEquals(Reply(422, "InsufficientFunds: balance too low for 5000"), post("k-1", request))
        assertEquals(emptyList<String>(), charges)
    }

    @Test
    fun `a transient failure lets the retry start again`() {
        val request = PaymentRequest("t", "i-2", 10)
        unavailable = true
        assertEquals(503, post("k-2", request).status)
        unavailable = false
        assertEquals(201, post("k-2", request).status)
    }

    @Test
    fun `a thrown error rolls the claim back with the work`() {
        val request = PaymentRequest("t", "i-3", 10)
        val failing = object : PaymentProvider {
            override fun charge(idempotencyKey: String, amount: Long): Boolean = error("provider returned garbage")
        }
        val broken = PaymentHandler(IdempotencyStoreFactory(db.store, ConsumerNamespace("payments"), 24.hours, errors = AppErrorCodec), kotlinx.serialization.json.Json, failing)
        assertThrows<IllegalStateException> { transaction(exposed) { broken.handle(this, "k-3", request) } }
        assertEquals(201, post("k-3", request).status)
    }

    @Test
    fun `in flight and reused keys`() {
        val request = PaymentRequest("t", "i-4", 10)
        db.app().use { holder ->
            val key = org.idempotency.core.parseIdempotencyKey(ConsumerNamespace("payments"), "k-4").getOrThrow()!!
            IdempotencyStoreFactory(db.store, ConsumerNamespace("payments"), 1.hours).inTransaction(holder).getOrThrow()
                .begin(key, kotlinx.serialization.json.Json.encodeToJsonElement(PaymentRequest.serializer(), request)).getOrThrow()
            assertEquals(409, post("k-4", request).status)
            holder.rollback()
        }
        assertEquals(201, post("k-4", request).status)
        assertEquals(Reply(422, "key reused for another request (first: invoice i-4)"), post("k-4", request.copy(invoice = "i-5")))
    }

    @Test
    fun `a stored result that no longer decodes is IncompatibleState`() {
        val request = PaymentRequest("t", "i-6", 10)
        assertEquals(201, post("k-6", request).status)
        db.execute("UPDATE ${db.store} SET result_payload = '{\"paymentId\": \"not a number\"}'")
        val reply = post("k-6", request)
        assertEquals(500, reply.status)
        assertTrue(reply.body.startsWith("stored state drifted: incompatible stored state"), reply.body)
    }

    @Test
    fun `the scheduled purge runs as the service`() {
        db.app().use { c -> assertEquals(0, PaymentsWiring.purge(db.store, c).getOrThrow()); c.commit() }
    }
}
