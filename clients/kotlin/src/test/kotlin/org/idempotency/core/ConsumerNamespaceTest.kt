package org.idempotency.core

import org.idempotency.Kat
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

class ConsumerNamespaceTest {
    @Test
    fun `alphabet is lower case, digits, dash and underscore`() {
        assertEquals("pay-ments_2", ConsumerNamespace("pay-ments_2").value)
        for (bad in listOf("Pay", "pay ments", "pay.ments", "paymënts", "pay/x")) {
            assertThrows<InvalidNamespaceException> { ConsumerNamespace(bad) }
        }
    }

    @Test
    fun `length is capped at 64`() {
        ConsumerNamespace("n".repeat(64))
        val e = assertThrows<InvalidNamespaceException> { ConsumerNamespace("n".repeat(65)) }
        assertEquals("The namespace is 65 characters long; the limit is 64.", e.detail)
    }

    @Test
    fun `blank is rejected`() {
        assertThrows<InvalidNamespaceException> { ConsumerNamespace("") }
        assertThrows<InvalidNamespaceException> { ConsumerNamespace("   ") }
        assertTrue(ConsumerNamespace.of("").isFailure)
    }

    @Test
    fun `keys csv namespace rows give the server's answers`() {
        val rows = Kat.rows("keys.csv").filter { it["function"] == "namespace" }
        assertTrue(rows.size >= 10, "namespace rows read: ${rows.size}")
        for (row in rows) {
            val input = Kat.string(row.getValue("input"))!!
            if (row["key"] == "ok") {
                assertEquals(input, ConsumerNamespace(input).value, row["name"])
            } else {
                val e = assertThrows<InvalidNamespaceException>(row.getValue("name")) { ConsumerNamespace(input) }
                assertEquals(row["message"], e.reason, row["name"])
                assertEquals(row["detail"], e.detail, row["name"])
            }
        }
    }
}
