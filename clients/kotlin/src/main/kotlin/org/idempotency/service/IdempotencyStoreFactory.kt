package org.idempotency.service

import kotlinx.serialization.KSerializer
import kotlinx.serialization.json.Json
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyErrorCodec
import org.idempotency.core.IdempotencyErrors
import org.jetbrains.exposed.v1.jdbc.JdbcTransaction
import java.sql.Connection
import kotlin.time.Duration
import kotlin.time.toKotlinDuration

/**
 * Binds the store to a caller-owned transaction: stateless apart from the
 * one-time check of the server. [tableName] is the store the service owns,
 * to which its migration bound [namespace] (idem_create_store or an existing
 * table, then idem_bind_store and idem_grant); [replayWindow] is passed to
 * every begin (the namespace's own window, if set, must not be shorter).
 * [inFlightWait] lets a begin wait that long for another holder before
 * answering InFlight. [errors] is the codec ([IdempotencyErrors.codec] when null).
 * No binding ever opens, commits or rolls back a transaction.
 */
class IdempotencyStoreFactory(
    val tableName: String,
    val namespace: ConsumerNamespace,
    val replayWindow: Duration,
    val inFlightWait: Duration? = null,
    errors: IdempotencyErrorCodec? = null,
) {
    /** The same factory with a java.time window. */
    constructor(
        tableName: String,
        namespace: ConsumerNamespace,
        replayWindow: java.time.Duration,
        inFlightWait: java.time.Duration? = null,
        errors: IdempotencyErrorCodec? = null,
    ) : this(tableName, namespace, replayWindow.toKotlinDuration(), inFlightWait?.toKotlinDuration(), errors)

    private val codec = errors
    internal val errors: IdempotencyErrorCodec get() = codec ?: IdempotencyErrors.codec
    internal val check = ServerCheck(tableName)

    init {
        require(replayWindow.isPositive()) { "replayWindow must be positive, not $replayWindow" }
        require(inFlightWait == null || !inFlightWait.isNegative()) { "inFlightWait must not be negative" }
        require(TABLE_NAME.matches(tableName)) { "tableName must be a table name, optionally schema-qualified: $tableName" }
    }

    /**
     * The store in the transaction open on [connection]: a failure (the codec's
     * implementation error) when the connection is in autocommit mode or has no
     * transaction isolation, as the specification's hard guard says.
     */
    fun inTransaction(connection: Connection): Result<RawIdempotencyStore> = runCatching {
        connection.autoCommit to connection.transactionIsolation
    }.fold(
        onSuccess = { (autoCommit, isolation) ->
            if (autoCommit || isolation == Connection.TRANSACTION_NONE) {
                Result.failure(
                    errors.implementation(
                        "inTransaction needs a connection with its transaction open (autocommit off); " +
                            "this one is in autocommit mode: call setAutoCommit(false) first, or use inConnection", null,
                    ),
                )
            } else {
                Result.success(ExposedRawIdempotencyStore(connection, this))
            }
        },
        onFailure = { Result.failure(errors.implementation("the connection's state cannot be read: ${it.message}", it)) },
    )

    /** The store on [connection] in any state; the caller commits or rolls back. A begin in autocommit mode is refused. */
    fun inConnection(connection: Connection): RawIdempotencyStore = ExposedRawIdempotencyStore(connection, this)

    /** The store in an Exposed transaction (`transaction { factory.withTx(this) }`), on its JDBC connection. */
    fun withTx(tx: JdbcTransaction): RawIdempotencyStore =
        ExposedRawIdempotencyStore(tx.connection.connection as Connection, this)

    private companion object {
        val PART = "(?:[A-Za-z_][A-Za-z0-9_$]*|\"(?:[^\"]|\"\")+\")"
        val TABLE_NAME = Regex("$PART(?:\\.$PART)?")
    }
}

/** [IdempotencyStoreFactory] typed once at wiring time by [typedAs]. */
class TypedIdempotencyStoreFactory<Req, Res>(
    val factory: IdempotencyStoreFactory,
    private val json: Json,
    private val req: KSerializer<Req>,
    private val res: KSerializer<Res>,
) {
    /** The typed store in the transaction open on [connection] (refused in autocommit mode). */
    fun inTransaction(connection: Connection): Result<IdempotencyStore<Req, Res>> =
        factory.inTransaction(connection).map { IdempotencyStoreImpl(it, json, req, res) }

    /** The typed store on [connection] in any state. */
    fun inConnection(connection: Connection): IdempotencyStore<Req, Res> =
        IdempotencyStoreImpl(factory.inConnection(connection), json, req, res)

    /** The typed store in an Exposed transaction. */
    fun withTx(tx: JdbcTransaction): IdempotencyStore<Req, Res> = IdempotencyStoreImpl(factory.withTx(tx), json, req, res)
}
