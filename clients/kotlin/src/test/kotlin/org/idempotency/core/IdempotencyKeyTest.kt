package org.idempotency.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

class IdempotencyKeyTest {
    private val ns = ConsumerNamespace("orders")

    @Test
    fun `a blank key cannot be made`() {
        assertThrows<IllegalArgumentException> { IdempotencyKey(ns, "") }
        assertThrows<IllegalArgumentException> { IdempotencyKey(ns, " \t\u3000") }
    }

    @Test
    fun `an oversize key cannot be made, counted in code points`() {
        IdempotencyKey(ns, "k".repeat(255))
        IdempotencyKey(ns, "\uD83D\uDE00".repeat(255))   // 510 UTF-16 units, 255 characters
        val e = assertThrows<IllegalArgumentException> { IdempotencyKey(ns, "k".repeat(256)) }
        assertEquals("invalid idempotency key: The key is 256 characters long after trimming; the limit is 255.", e.message)
    }

    @Test
    fun `control characters and untrimmed values cannot be made`() {
        assertThrows<IllegalArgumentException> { IdempotencyKey(ns, "a\nb") }
        assertThrows<IllegalArgumentException> { IdempotencyKey(ns, " a") }
    }

    @Test
    fun `keys compare by namespace and value`() {
        assertEquals(IdempotencyKey(ns, "k"), IdempotencyKey(ns, "k"))
        assertNotEquals(IdempotencyKey(ns, "k"), IdempotencyKey(ConsumerNamespace("other"), "k"))
    }
}
