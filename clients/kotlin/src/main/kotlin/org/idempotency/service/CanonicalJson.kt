package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import java.sql.Connection

/**
 * The canonical JSON the store hashes, computed by the server (idem_canonical):
 * one canonical form, never a second one in the JVM. The request fingerprint
 * is the SHA-256 of these bytes, as idem_begin computes it; [ignore] names the
 * parts (RFC 6901 JSON Pointers) a namespace's fingerprint leaves out.
 */
internal object CanonicalJson {
    /** The canonical UTF-8 bytes of [element], from the server on [connection]. */
    fun canonicalUtf8(connection: Connection, element: JsonElement, ignore: List<String> = emptyList()): ByteArray =
        connection.prepareStatement("SELECT idempotency.idem_canonical(?::jsonb, ?)").use { ps ->
            ps.setString(1, element.toString())
            ps.setArray(2, connection.createArrayOf("text", ignore.toTypedArray()))
            ps.executeQuery().use { rs -> rs.next(); rs.getString(1).toByteArray(Charsets.UTF_8) }
        }
}
