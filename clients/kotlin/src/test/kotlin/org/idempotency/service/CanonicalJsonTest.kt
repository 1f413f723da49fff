package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonArray
import org.idempotency.Kat
import org.idempotency.core.KeyRules
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.security.MessageDigest

/** Canonical JSON comes from the server: the specification's canonicalisation rules, asserted through it. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CanonicalJsonTest {
    private lateinit var db: IdempotencyStoreHarness

    @BeforeAll fun start() { db = IdempotencyStoreHarness(migrate = false) }
    @AfterAll fun stop() = db.close()

    private fun canonical(text: String, ignore: List<String> = emptyList()) =
        db.admin().use { CanonicalJson.canonicalUtf8(it, Json.parseToJsonElement(text), ignore).toString(Charsets.UTF_8) }

    @Test
    fun `object keys are sorted at every depth`() {
        assertEquals("""{"a":{"":null,"z":[3,{"x":2,"y":1}]},"ab":2,"b":1}""",
            canonical("""{"b": 1, "ab": 2, "a": {"z": [3, {"y": 1, "x": 2}], "": null}}"""))
    }

    @Test
    fun `array order is kept`() = assertEquals("""[3,1,2,"b","a"]""", canonical("""[3, 1, 2, "b", "a"]"""))

    @Test
    fun `whitespace is stripped`() = assertEquals("""{"a":[1,2]}""", canonical("{ \"a\" :\n [ 1 ,\t2 ] }"))

    @Test
    fun `the same logical input gives byte-identical output`() {
        db.admin().use { c ->
            val a = CanonicalJson.canonicalUtf8(c, JsonObject(mapOf("x" to JsonPrimitive(1), "y" to JsonArray(listOf(JsonPrimitive("é"))))))
            val b = CanonicalJson.canonicalUtf8(c, Json.parseToJsonElement("""{"y":["é"],"x":1}"""))
            assertArrayEquals(a, b)
        }
    }

    @Test
    fun `vectors csv canonical and fingerprint rows agree`() {
        val rows = Kat.rows("vectors.csv").filter { it["kind"] == "canonical" || it["kind"] == "fingerprint" }
        assertTrue(rows.size >= 60, "rows read: ${rows.size}")
        for (row in rows) {
            val ignore = row.getValue("parts_hex").takeIf { row["kind"] == "fingerprint" && it.isNotEmpty() }
                ?.split('.')?.map { String(OutcomeWireHex.unhex(it), Charsets.UTF_8) } ?: emptyList()
            val bytes = db.admin().use { CanonicalJson.canonicalUtf8(it, Json.parseToJsonElement(row.getValue("input")), ignore) }
            assertEquals(row["canonical"], bytes.toString(Charsets.UTF_8), row["name"])
            assertEquals(row["sha256"], KeyRules.hex(MessageDigest.getInstance("SHA-256").digest(bytes)), row["name"])
        }
    }
}

/** Hex decoding for the vectors' pointer columns. */
object OutcomeWireHex {
    fun unhex(s: String) = org.idempotency.core.OutcomeWire.unhex(s)
}
