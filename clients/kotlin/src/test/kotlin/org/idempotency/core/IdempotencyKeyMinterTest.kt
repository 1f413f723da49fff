package org.idempotency.core

import org.idempotency.Kat
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class IdempotencyKeyMinterTest {
    private val minter = IdempotencyKeyMinter(ConsumerNamespace("orders"))

    @Test
    fun `same parts give the same key`() {
        val a = minter.mint(listOf("tenant-42", "invoice-1001")).getOrThrow()
        val b = IdempotencyKeyMinter(ConsumerNamespace("orders")).mint("tenant-42", "invoice-1001").getOrThrow()
        assertEquals(a, b)
        // docs/api.md's example, and the worked encoding of ["a"]
        assertEquals("411180648d81357fd33e55d40a80bfdbf76b8a6f9902b5ec280f19b32b2dc8ae", a.value)
        assertEquals("000000010000000161", KeyRules.hex(KeyRules.mintEncoding(listOf("a"))))
    }

    @Test
    fun `different parts, splits or order give different keys`() {
        val keys = listOf(listOf("ab", "c"), listOf("a", "bc"), listOf("c", "ab"), listOf("abc"))
            .map { minter.mint(it).getOrThrow().value }
        assertEquals(keys.size, keys.toSet().size)
        assertNotEquals(minter.mint("a", "b").getOrThrow(), minter.mint("b", "a").getOrThrow())
    }

    @Test
    fun `no parts or a blank part is GeneralValidation`() {
        for (parts in listOf(emptyList(), listOf("a", ""), listOf(" \t"), listOf("a", null))) {
            val e = minter.mint(parts).exceptionOrNull()
            assertTrue(e is IdempotencyError.Invocation.GeneralValidation, "$parts gave $e")
        }
    }

    @Test
    fun `vectors csv mint rows agree`() {
        val rows = Kat.rows("vectors.csv").filter { it["kind"] == "mint" }
        assertTrue(rows.size >= 20, "mint rows read: ${rows.size}")
        for (row in rows) {
            val parts = Kat.strings(row.getValue("input")).map { it!! }
            val encoded = parts.joinToString(".") { KeyRules.hex(it.toByteArray(Charsets.UTF_8)) }
            assertEquals(row["parts_hex"], encoded, row["name"])
            assertEquals(row["sha256"], minter.mint(parts).getOrThrow().value, row["name"])
        }
    }

    @Test
    fun `keys csv mint rows agree, errors included`() {
        val rows = Kat.rows("keys.csv").filter { it["function"] == "mint" }
        assertTrue(rows.size >= 7, "mint rows read: ${rows.size}")
        for (row in rows) {
            val result = minter.mint(Kat.strings(row.getValue("input")))
            if (row.getValue("key").isNotEmpty()) {
                assertEquals(Kat.string(row.getValue("key")), result.getOrThrow().value, row["name"])
            } else {
                val e = result.exceptionOrNull() as IdempotencyError.Invocation.GeneralValidation
                assertEquals(row["message"], e.message, row["name"])
                assertEquals(row["detail"], e.detail, row["name"])
            }
        }
    }
}
