package org.idempotency

import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.io.File

/** docs/kotlin.md shows the handler the tests run, not a copy that drifted from it. */
class DocsTest {
    @Test
    fun `the guide's handler is the tested one`() {
        val guide = File(Kat.root, "docs/kotlin.md").readText()
        val section = guide.substringAfter("## A handler")
        val block = section.substringAfter("```kotlin\n").substringBefore("```")
        val source = File(Kat.root, "clients/kotlin/src/test/kotlin/org/example/payments/PaymentHandler.kt").readText()
        assertTrue(block.lines().size > 40 && source.contains(block), "docs/kotlin.md's handler differs from PaymentHandler.kt")
    }
}
