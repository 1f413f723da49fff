package org.idempotency.service

import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonElement
import org.idempotency.core.IdempotencyKey

/**
 * An HTTP answer as the server's functions build it: status, headers and body
 * (an RFC 9457 problem for errors). Committed as a result, it is what
 * idem_http_response replays byte for byte, plus `Idempotency-Replayed: true`.
 */
@Serializable
data class IdempotencyHttpResponse(val status: Int, val headers: Map<String, String> = emptyMap(), val body: JsonElement? = null)

/** An Idempotency-Key header checked by idem_http_key. */
sealed class IdempotencyHttpKey {
    /** A valid key (quoted and bare forms are the same key). */
    data class Accepted(val key: IdempotencyKey) : IdempotencyHttpKey()

    /** A missing or malformed header: answer [response] (400). */
    data class Refused(val response: IdempotencyHttpResponse) : IdempotencyHttpKey()
}
