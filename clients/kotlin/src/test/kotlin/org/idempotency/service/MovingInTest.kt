package org.idempotency.service

import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.IdempotencyOutcome.FreshAttempt
import org.idempotency.core.IdempotencyOutcome.Mismatch
import org.idempotency.core.IdempotencyOutcome.PriorError
import org.idempotency.core.IdempotencyOutcome.PriorResult
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.security.MessageDigest
import kotlin.time.Duration.Companion.hours

/**
 * The specification's canonicalisation, as its library hashed requests:
 * object members sorted by code point, arrays kept, no whitespace, and every
 * value printed as kotlinx prints it (numbers keep their text: 1e2 stays 1e2).
 */
object SpecCanonicalJson {
    fun canonicalUtf8(element: JsonElement): ByteArray = normalise(element).toString().toByteArray(Charsets.UTF_8)

    private fun normalise(e: JsonElement): JsonElement = when (e) {
        is JsonObject -> JsonObject(e.entries.sortedWith { a, b -> codePointOrder(a.key, b.key) }.associate { it.key to normalise(it.value) })
        is JsonArray -> JsonArray(e.map(::normalise))
        else -> e
    }

    private fun codePointOrder(a: String, b: String): Int {
        val x = a.codePoints().toArray()
        val y = b.codePoints().toArray()
        for (i in 0 until minOf(x.size, y.size)) if (x[i] != y[i]) return x[i].compareTo(y[i])
        return x.size.compareTo(y.size)
    }

    fun hash(element: JsonElement): ByteArray = MessageDigest.getInstance("SHA-256").digest(canonicalUtf8(element))
}

@Serializable data class Quote(val rate: Double)

/**
 * Moving in: a specification service's idempotency_record, with rows its
 * library wrote, becomes the service's store; rows within their window replay,
 * except those whose request text differs from the store's canonical form.
 */
class MovingInTest {
    /** A recorded row: the request as the spec's client sent it, and how the store answers its retry once bound. */
    private class Row(val name: String, val request: String, val status: String = "committed", val whenBound: String, val expired: Boolean = false)

    private val rows = listOf(
        Row("plain", """{"currency": "EUR", "amount": 100}""", whenBound = "prior_result"),
        Row("failed", """{"b": 1, "a": [true, null]}""", status = "failed", whenBound = "prior_error"),
        Row("trailing_zeros", """{"amount": 1.50}""", whenBound = "prior_result"),
        Row("big_integer", """{"n": 123456789012345678901234567890}""", whenBound = "prior_result"),
        Row("strings", """{"s": "tab\t quote\" slash/ del\u007f line\u2028 é 日本"}""", whenBound = "prior_result"),
        Row("key_order", """{"z": 1, "é": 2, "Z": 3, "😀": 4, "\ufffd": 5}""", whenBound = "prior_result"),
        Row("exponent", """{"amount": 1e2}""", whenBound = "mismatch"),
        Row("exponent_negative", """{"rate": 1E-2}""", whenBound = "mismatch"),
        Row("negative_zero", """{"n": -0}""", whenBound = "mismatch"),
        Row("double_small", Json.encodeToString(Quote.serializer(), Quote(1.0E-5)), whenBound = "mismatch"),
        Row("double_plain", Json.encodeToString(Quote.serializer(), Quote(0.5)), whenBound = "prior_result"),
        Row("abandoned_claim", """{"job": 1}""", status = "in_progress", whenBound = "fresh", expired = true),
    )

    private val minter = IdempotencyKeyMinter(org.idempotency.core.ConsumerNamespace("orders"))
    private fun key(row: Row) = minter.mint("spec", row.name).getOrThrow()

    /** A harness with the spec's table and rows, then the moving-in migration at [location]. */
    private fun movedIn(location: String): IdempotencyStoreHarness {
        val db = IdempotencyStoreHarness(migrate = false)
        db.migrate("classpath:db/spec", target = "1")
        db.admin().use { c ->
            c.prepareStatement(
                "INSERT INTO public.idempotency_record (namespace, key_value, status, request_hash, request_payload, " +
                    "result_payload, error_payload, created_at, updated_at, expires_at) " +
                    "VALUES ('orders', ?, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, now() - interval '1 hour', now() - interval '1 hour', " +
                    "now() + CASE WHEN ? THEN interval '-1 minute' ELSE interval '23 hours' END)",
            ).use { ps ->
                for (row in rows) {
                    val request = Json.parseToJsonElement(row.request)
                    ps.setString(1, key(row).value)
                    ps.setString(2, row.status)
                    ps.setBytes(3, SpecCanonicalJson.hash(request))
                    ps.setString(4, request.toString())
                    ps.setString(5, if (row.status == "committed") """{"row": "${row.name}"}""" else null)
                    ps.setString(6, if (row.status == "failed") """{"class_tag": "InsufficientFunds", "message": "balance too low", "cause": "account 42"}""" else null)
                    ps.setBoolean(7, row.expired)
                    ps.addBatch()
                }
                ps.executeBatch()
            }
        }
        db.migrate("classpath:db/spec", location)
        return db
    }

    /** The store's answer to each row's retry, sent as the spec's client sends it. */
    private fun answers(db: IdempotencyStoreHarness): Map<String, IdempotencyOutcome> {
        val factory = IdempotencyStoreFactory("public.idempotency_record", db.namespace, 24.hours)
        return db.app().use { c ->
            val store = factory.inTransaction(c).getOrThrow()
            rows.associate { it.name to store.begin(key(it), Json.parseToJsonElement(it.request)).getOrThrow() }.also { c.rollback() }
        }
    }

    @Test
    fun `bound as it is, rows replay unless their text differs from the canonical form`() {
        movedIn("classpath:db/spec-bind").use { db ->
            val answers = answers(db)
            assertEquals(rows.associate { it.name to it.whenBound }, answers.mapValues { it.value.kind })
            assertEquals(PriorResult(Json.parseToJsonElement("""{"row": "plain"}""")), answers["plain"])
            val failed = answers.getValue("failed") as PriorError
            assertEquals("InsufficientFunds", failed.stored.classTag)
            assertEquals("balance too low", failed.error.message)
            val exponent = answers.getValue("exponent") as Mismatch
            assertArrayEquals(SpecCanonicalJson.hash(Json.parseToJsonElement("""{"amount": 1e2}""")), exponent.recordedHash)
            assertArrayEquals(MessageDigest.getInstance("SHA-256").digest("""{"amount":100}""".toByteArray()), exponent.submittedHash)
            assertEquals(Json.parseToJsonElement("""{"amount": 100}"""), exponent.recordedRequest)
            val takeover = answers.getValue("abandoned_claim") as FreshAttempt
            assertTrue(takeover.takeover)
            assertEquals(2, takeover.attempt)
        }
    }

    @Test
    fun `with the fingerprints computed again by the migration, every row replays`() {
        movedIn("classpath:db/spec-rehash").use { db ->
            val answers = answers(db)
            val expected = rows.associate {
                it.name to when (it.whenBound) { "mismatch" -> "prior_result"; else -> it.whenBound }
            }
            assertEquals(expected, answers.mapValues { it.value.kind })
            assertEquals(PriorResult(Json.parseToJsonElement("""{"row": "exponent"}""")), answers["exponent"])
        }
    }
}
