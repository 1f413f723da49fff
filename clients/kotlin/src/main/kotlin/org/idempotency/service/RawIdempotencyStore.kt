package org.idempotency.service

import kotlinx.serialization.json.JsonElement
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyKey
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.StoredAppError
import java.time.Instant

/**
 * The store on JSON, bound to one caller-owned transaction (or connection) by
 * [IdempotencyStoreFactory]. Every call runs the store's SQL function in that
 * transaction and never opens, commits or rolls one back. Failures are
 * Result.failure: the codec's errors, or the server's error with its SQLSTATE.
 */
interface RawIdempotencyStore {
    /** The namespace this store serves. */
    val namespace: ConsumerNamespace

    /** idem_begin: FreshAttempt (do the work, then finish it here), InFlight, PriorResult, PriorError or Mismatch. */
    fun begin(key: IdempotencyKey, request: JsonElement): Result<IdempotencyOutcome>

    /** idem_commit: records [result] for replay, with the fence of this binding's fresh attempt (or [fence]). */
    fun commit(key: IdempotencyKey, result: JsonElement, fence: Long? = null): Result<Unit>

    /** idem_fail_permanent: records [error] (through the codec) for replay. */
    fun failPermanent(key: IdempotencyKey, error: Throwable, fence: Long? = null): Result<Unit>

    /** idem_fail_permanent with the stored form itself. */
    fun failPermanent(key: IdempotencyKey, error: StoredAppError, fence: Long? = null): Result<Unit>

    /** idem_fail_transient: forgets the attempt, so the next begin is fresh. */
    fun failTransient(key: IdempotencyKey, fence: Long? = null): Result<Unit>

    /** idem_purge: deletes expired records of every store, in this transaction; needs EXECUTE on it. */
    fun purgeExpired(): Result<Int>

    /** idem_purge in chunks of [batchSize], at most [maxBatches] of them. */
    fun purgeExpired(batchSize: Int, maxBatches: Int? = null): Result<Int>

    /**
     * idem_begin_batch: many keys in one call, one outcome per key in their
     * order; finish each fresh key as a single begin's.
     */
    fun beginBatch(requests: List<Pair<IdempotencyKey, JsonElement>>): Result<List<IdempotencyOutcome>>

    /**
     * idem_extend_lease: a heartbeat for a claim that outlives its transaction
     * (a namespace with an in_progress_lease); returns the lease's new end.
     * [fence] defaults to this binding's fresh attempt of [key].
     */
    fun extendLease(key: IdempotencyKey, fence: Long? = null): Result<Instant>

    /**
     * idem_save_point: records how far the work got ([point], with [state] to
     * resume from), which a takeover answers; also a heartbeat.
     */
    fun savePoint(key: IdempotencyKey, point: String, state: JsonElement?, fence: Long? = null): Result<Instant>

    /** idem_http_response: the HTTP answer to a replay, an in-flight key or a reused one (not to a fresh attempt). */
    fun httpResponse(outcome: IdempotencyOutcome, retryAfterSeconds: Int = 1, docsUri: String? = null): Result<IdempotencyHttpResponse>

    /** idem_http_key: an Idempotency-Key header checked (quoted or bare), or the 400 to answer. */
    fun httpKey(header: String?, docsUri: String? = null): Result<IdempotencyHttpKey>
}
