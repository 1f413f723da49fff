package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.jsonObject
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyErrorCodec
import org.idempotency.core.IdempotencyErrors
import org.idempotency.core.IdempotencyKey
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.IdempotencyServerException
import org.idempotency.core.KeyRules
import org.idempotency.core.OutcomeWire
import org.idempotency.core.StoredAppError
import org.postgresql.util.PSQLException
import java.sql.Connection
import java.sql.PreparedStatement
import java.sql.ResultSet
import java.sql.SQLException
import java.sql.Types
import java.time.Instant
import java.time.OffsetDateTime
import kotlin.time.Duration

/**
 * The store on the caller's JDBC connection (Exposed's, or a plain one): each
 * call is one statement on the caller's connection, in its transaction. It
 * remembers the fence of each fresh attempt it answered, and passes it when
 * that key is finished.
 */
internal class ExposedRawIdempotencyStore(
    private val connection: Connection,
    private val factory: IdempotencyStoreFactory,
) : RawIdempotencyStore {
    override val namespace: ConsumerNamespace get() = factory.namespace
    val errors: IdempotencyErrorCodec get() = factory.errors
    private val fences = HashMap<String, Long>()

    override fun begin(key: IdempotencyKey, request: JsonElement): Result<IdempotencyOutcome> = call(key, claims = true) {
        connection.prepareStatement("SELECT $OUTCOME_COLUMNS FROM idempotency.idem_begin(?, ?, ?::jsonb, ?::interval, ?::interval) o")
            .use { ps ->
                ps.setString(1, namespace.value)
                ps.setString(2, key.value)
                ps.setString(3, request.toString())
                ps.setString(4, interval(factory.replayWindow))
                ps.setString(5, factory.inFlightWait?.let(::interval))
                ps.executeQuery().use { rs ->
                    rs.next()
                    outcome(rs).also { remember(key, it) }
                }
            }
    }

    override fun beginBatch(requests: List<Pair<IdempotencyKey, JsonElement>>): Result<List<IdempotencyOutcome>> =
        call(requests.firstOrNull()?.first, claims = true) {
            requests.forEach { (k, _) -> checkNamespace(k)?.let { throw Refusal(it) } }
            connection.prepareStatement(
                "SELECT $OUTCOME_COLUMNS FROM idempotency.idem_begin_batch(?, ?, ?, ?::interval, ?::interval) " +
                    "WITH ORDINALITY AS o ORDER BY o.ordinality",
            ).use { ps ->
                ps.setString(1, namespace.value)
                ps.setArray(2, connection.createArrayOf("text", requests.map { it.first.value }.toTypedArray()))
                ps.setArray(3, connection.createArrayOf("jsonb", requests.map { it.second.toString() }.toTypedArray()))
                ps.setString(4, interval(factory.replayWindow))
                ps.setString(5, factory.inFlightWait?.let(::interval))
                ps.executeQuery().use { rs ->
                    val out = ArrayList<IdempotencyOutcome>(requests.size)
                    while (rs.next()) out += outcome(rs)
                    out.forEachIndexed { i, o -> remember(requests[i].first, o) }
                    out
                }
            }
        }

    override fun commit(key: IdempotencyKey, result: JsonElement, fence: Long?): Result<Unit> = call(key) {
        execute("SELECT idempotency.idem_commit(?, ?, ?::jsonb, ?)", key, result.toString(), fenceOf(key, fence))
        fences.remove(key.value)
    }

    override fun failPermanent(key: IdempotencyKey, error: Throwable, fence: Long?): Result<Unit> =
        failPermanent(key, errors.encode(error), fence)

    override fun failPermanent(key: IdempotencyKey, error: StoredAppError, fence: Long?): Result<Unit> = call(key) {
        execute("SELECT idempotency.idem_fail_permanent(?, ?, ?::jsonb, ?)", key, OutcomeWire.storedJson(error).toString(), fenceOf(key, fence))
        fences.remove(key.value)
    }

    override fun failTransient(key: IdempotencyKey, fence: Long?): Result<Unit> = call(key) {
        execute("SELECT idempotency.idem_fail_transient(?, ?, ?)", key, fenceOf(key, fence))
        fences.remove(key.value)
    }

    override fun purgeExpired(): Result<Int> = call(null) {
        connection.prepareStatement("SELECT idempotency.idem_purge()").use { ps -> count(ps) }
    }

    override fun purgeExpired(batchSize: Int, maxBatches: Int?): Result<Int> = call(null) {
        connection.prepareStatement("SELECT idempotency.idem_purge(?, ?)").use { ps ->
            ps.setInt(1, batchSize)
            if (maxBatches == null) ps.setNull(2, Types.INTEGER) else ps.setInt(2, maxBatches)
            count(ps)
        }
    }

    override fun extendLease(key: IdempotencyKey, fence: Long?): Result<Instant> = call(key) {
        val f = fenceOf(key, fence) ?: throw Refusal(noFence("extendLease"))
        instant("SELECT idempotency.idem_extend_lease(?, ?, ?)", key, f)
    }

    override fun savePoint(key: IdempotencyKey, point: String, state: JsonElement?, fence: Long?): Result<Instant> = call(key) {
        val f = fenceOf(key, fence) ?: throw Refusal(noFence("savePoint"))
        instant("SELECT idempotency.idem_save_point(?, ?, ?, ?::jsonb, ?)", key, point,
            state?.toString(), f)
    }

    override fun httpResponse(outcome: IdempotencyOutcome, retryAfterSeconds: Int, docsUri: String?): Result<IdempotencyHttpResponse> =
        call(null) {
            connection.prepareStatement(
                "SELECT status, headers::text AS headers, body::text AS body FROM idempotency.idem_http_response(" +
                    "jsonb_populate_record(NULL::idempotency.idem_outcome, ?::jsonb), ?, ?)",
            ).use { ps ->
                ps.setString(1, outcomeRow(outcome).toString())
                ps.setInt(2, retryAfterSeconds)
                ps.setString(3, docsUri)
                ps.executeQuery().use { rs -> rs.next(); response(rs) }
            }
        }

    override fun httpKey(header: String?, docsUri: String?): Result<IdempotencyHttpKey> = call(null) {
        connection.prepareStatement(
            "SELECT key, status, headers::text AS headers, body::text AS body FROM idempotency.idem_http_key(?, ?, ?)",
        ).use { ps ->
            ps.setString(1, namespace.value)
            ps.setString(2, header)
            ps.setString(3, docsUri)
            ps.executeQuery().use { rs ->
                rs.next()
                val key = rs.getString("key")
                if (key != null) IdempotencyHttpKey.Accepted(IdempotencyKey(namespace, key))
                else IdempotencyHttpKey.Refused(response(rs))
            }
        }
    }

    // ---- helpers ----

    /** A refusal made by this library, carried out of [call] as a failure. */
    private class Refusal(val error: Throwable) : RuntimeException(null, null, false, false)

    /**
     * Runs [body] after the checks every call shares (the key's namespace, the
     * first-use check, and for a begin the autocommit refusal); the server's
     * errors become failures with their SQLSTATE.
     */
    private fun <T> call(key: IdempotencyKey?, claims: Boolean = false, body: () -> T): Result<T> = try {
        key?.let { k -> checkNamespace(k)?.let { return Result.failure(it) } }
        if (claims && connection.autoCommit) {
            return Result.failure(
                errors.implementation(
                    "idempotency begin refused: the connection is in autocommit mode, where a fresh claim would be " +
                        "committed unfinished by its own statement; open a transaction (setAutoCommit(false), or Exposed's " +
                        "transaction {}) and begin, work and finish in it", null,
                ),
            )
        }
        factory.check.problem(connection, namespace, errors)?.let { return Result.failure(it) }
        Result.success(body())
    } catch (e: Refusal) {
        Result.failure(e.error)
    } catch (e: SQLException) {
        Result.failure(errors.serverError(serverException(e)))
    }

    /** A key minted or parsed for another namespace is the caller's mistake, not the server's. */
    private fun checkNamespace(key: IdempotencyKey): Throwable? =
        if (key.namespace == namespace) null
        else errors.generalValidation(
            "idempotency key of another namespace",
            "The key was made for namespace \"${key.namespace}\"; this store serves \"$namespace\".",
        )

    /** The error of a heartbeat or point whose claim this binding does not know. */
    private fun noFence(what: String) = errors.implementation(
        "$what needs the claim's fence: pass the fence of the FreshAttempt (this binding answered none for the key)", null,
    )

    /** Keeps the fence of a fresh attempt, which finishing the key then passes. */
    private fun remember(key: IdempotencyKey, outcome: IdempotencyOutcome) {
        if (outcome is IdempotencyOutcome.FreshAttempt && outcome.fence != null) fences[key.value] = outcome.fence
    }

    /** The fence given, else the one this binding's fresh attempt of the key carried, else null (this transaction's claim). */
    private fun fenceOf(key: IdempotencyKey, fence: Long?): Long? = fence ?: fences[key.value]

    /** Binds namespace, key, then [params]; a null last parameter is the fence (bigint), other nulls text. */
    private fun bind(ps: PreparedStatement, key: IdempotencyKey, vararg params: Any?) {
        ps.setString(1, namespace.value)
        ps.setString(2, key.value)
        params.forEachIndexed { i, p ->
            when (p) {
                null -> ps.setNull(i + 3, if (i == params.size - 1) Types.BIGINT else Types.VARCHAR)
                is Long -> ps.setLong(i + 3, p)
                is String -> ps.setString(i + 3, p)
                else -> ps.setObject(i + 3, p)
            }
        }
    }

    /** Runs a transition that returns void. */
    private fun execute(sql: String, key: IdempotencyKey, vararg params: Any?) {
        connection.prepareStatement(sql).use { ps -> bind(ps, key, *params); ps.executeQuery().close() }
    }

    /** Runs a heartbeat or point and reads the lease's new end. */
    private fun instant(sql: String, key: IdempotencyKey, vararg params: Any?): Instant =
        connection.prepareStatement(sql).use { ps ->
            bind(ps, key, *params)
            ps.executeQuery().use { rs -> rs.next(); rs.getObject(1, OffsetDateTime::class.java).toInstant() }
        }

    /** A purge's bigint count, as the specification's Int. */
    private fun count(ps: PreparedStatement): Int = ps.executeQuery().use { rs ->
        rs.next()
        rs.getLong(1).coerceAtMost(Int.MAX_VALUE.toLong()).toInt()
    }

    /** jsonb text as a JsonElement; numbers keep the server's text. */
    private fun json(text: String?): JsonElement? = text?.let { JSON.parseToJsonElement(it) }

    /** The outcome of the current row, by column name. */
    private fun outcome(rs: ResultSet): IdempotencyOutcome = when (val kind = rs.getString("kind")) {
        "fresh" -> IdempotencyOutcome.FreshAttempt(
            fence = rs.getLong("fence").takeIf { !rs.wasNull() },
            attempt = rs.getInt("attempt"),
            takeover = rs.getBoolean("takeover"),
            leaseEndsAt = rs.getObject("lease_ends_at", OffsetDateTime::class.java)?.toInstant(),
            recoveryPoint = rs.getString("recovery_point"),
            recoveryState = json(rs.getString("recovery_state")),
        )
        "in_flight" -> IdempotencyOutcome.InFlight(
            age = rs.getString("age_seconds")?.let(OutcomeWire::duration),
            leaseEndsAt = rs.getObject("lease_ends_at", OffsetDateTime::class.java)?.toInstant(),
        )
        "prior_result" -> IdempotencyOutcome.PriorResult(json(rs.getString("result")) ?: JsonNull)
        "prior_error" -> {
            val stored = OutcomeWire.storedFrom(json(rs.getString("error"))?.jsonObject ?: JsonObject(emptyMap()))
            IdempotencyOutcome.PriorError(IdempotencyErrors.replay(stored, errors), stored)
        }
        "mismatch" -> {
            val recorded = rs.getString("recorded_request")
            IdempotencyOutcome.Mismatch(
                recordedRequest = json(recorded) ?: JsonNull,
                recordedHash = rs.getBytes("recorded_hash"),
                submittedHash = rs.getBytes("submitted_hash"),
                requestRecorded = recorded != null,
            )
        }
        else -> throw SQLException("unknown idempotency outcome kind: $kind")
    }

    /** The outcome as an idem_outcome's JSON, for jsonb_populate_record. */
    private fun outcomeRow(outcome: IdempotencyOutcome): JsonObject {
        val m = LinkedHashMap<String, JsonElement>()
        m["kind"] = JsonPrimitive(outcome.kind)
        when (outcome) {
            is IdempotencyOutcome.FreshAttempt -> {
                m["attempt"] = JsonPrimitive(outcome.attempt)
                outcome.fence?.let { m["fence"] = JsonPrimitive(it) }
                m["takeover"] = JsonPrimitive(outcome.takeover)
                outcome.leaseEndsAt?.let { m["lease_ends_at"] = JsonPrimitive(it.toString()) }
                outcome.recoveryPoint?.let { m["recovery_point"] = JsonPrimitive(it) }
                outcome.recoveryState?.let { m["recovery_state"] = it }
            }
            is IdempotencyOutcome.InFlight -> {
                outcome.age?.let { m["age"] = JsonPrimitive(OutcomeWire.seconds(it) + " seconds") }
                outcome.leaseEndsAt?.let { m["lease_ends_at"] = JsonPrimitive(it.toString()) }
            }
            is IdempotencyOutcome.PriorResult -> m["result"] = outcome.value
            is IdempotencyOutcome.PriorError -> m["error"] = OutcomeWire.storedJson(outcome.stored)
            is IdempotencyOutcome.Mismatch -> {
                m["recorded_hash"] = JsonPrimitive("\\x" + KeyRules.hex(outcome.recordedHash))
                m["submitted_hash"] = JsonPrimitive("\\x" + KeyRules.hex(outcome.submittedHash))
            }
        }
        return JsonObject(m)
    }

    /** The status, headers and body columns of an HTTP function's row. */
    private fun response(rs: ResultSet): IdempotencyHttpResponse {
        val headers = json(rs.getString("headers"))?.jsonObject?.mapValues { (_, v) -> (v as? JsonPrimitive)?.contentOrNull ?: v.toString() }
        return IdempotencyHttpResponse(rs.getInt("status"), headers ?: emptyMap(), json(rs.getString("body")))
    }

    companion object {
        private val JSON = Json

        /** The outcome's columns, by name: a later release's columns are not read. */
        private const val OUTCOME_COLUMNS = "o.kind::text AS kind, o.result::text AS result, o.error::text AS error, " +
            "o.recorded_request::text AS recorded_request, o.recorded_hash, o.submitted_hash, o.attempt, " +
            "extract(epoch FROM o.age)::text AS age_seconds, o.fence, o.lease_ends_at, o.takeover, " +
            "o.recovery_point, o.recovery_state::text AS recovery_state"

        /** A duration as an interval literal, in microseconds. */
        fun interval(d: Duration): String = "${d.inWholeMicroseconds} microseconds"

        /** The server's error with its SQLSTATE, message, detail and hint. */
        fun serverException(e: SQLException): IdempotencyServerException {
            val m = (e as? PSQLException)?.serverErrorMessage
            return if (m != null) IdempotencyServerException(m.sqlState ?: e.sqlState, m.message ?: e.message.orEmpty(), m.detail, m.hint, e)
            else IdempotencyServerException(e.sqlState, e.message.orEmpty(), null, null, e)
        }
    }
}
