package org.idempotency.core

import org.idempotency.Kat
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class IdempotencyKeyParsingTest {
    private val ns = ConsumerNamespace("orders")

    @Test
    fun `null is success with null`() {
        assertNull(parseIdempotencyKey(ns, null).getOrThrow())
    }

    @Test
    fun `blank, oversize and control characters are GeneralValidation`() {
        for (raw in listOf("", "   ", "k".repeat(256), "order\n1001", "a\u007f")) {
            val e = parseIdempotencyKey(ns, raw).exceptionOrNull()
            assertTrue(e is IdempotencyError.Invocation.GeneralValidation, "${raw.take(10)} gave $e")
        }
    }

    @Test
    fun `values are trimmed and passed through`() {
        val key = parseIdempotencyKey(ns, "  3f2a9c1e-7b4d-4e0a  ").getOrThrow()!!
        assertEquals("3f2a9c1e-7b4d-4e0a", key.value)
        assertEquals(ns, key.namespace)
        assertEquals("order 1001", parseIdempotencyKey(ns, "\t\n order 1001 \r").getOrThrow()!!.value)
    }

    @Test
    fun `the codec makes the failure`() {
        val marker = IllegalStateException("service's own validation error")
        val codec = object : IdempotencyErrorCodec by DefaultIdempotencyErrorCodec {
            override fun generalValidation(message: String, detail: String?) = marker
        }
        assertSame(marker, parseIdempotencyKey(ns, "", codec).exceptionOrNull())
        val previous = IdempotencyErrors.codec
        try {
            IdempotencyErrors.codec = codec
            assertSame(marker, parseIdempotencyKey(ns, " ").exceptionOrNull())
            assertSame(marker, IdempotencyKeyMinter(ns).mint(emptyList()).exceptionOrNull())
        } finally {
            IdempotencyErrors.codec = previous
        }
    }

    @Test
    fun `keys csv parse rows agree, errors included`() {
        val rows = Kat.rows("keys.csv").filter { it["function"] == "parse" }
        assertTrue(rows.size >= 15, "parse rows read: ${rows.size}")
        for (row in rows) {
            val result = parseIdempotencyKey(ns, Kat.string(row.getValue("input")))
            if (row.getValue("message").isEmpty()) {
                assertEquals(Kat.string(row.getValue("key")), result.getOrThrow()?.value, row["name"])
            } else {
                val e = result.exceptionOrNull() as IdempotencyError.Invocation.GeneralValidation
                assertEquals(row["message"], e.message, row["name"])
                assertEquals(row["detail"], e.detail, row["name"])
            }
        }
    }
}
