package org.idempotency.service

import org.idempotency.core.ConsumerNamespace
import java.sql.Connection
import kotlin.time.Duration

/**
 * The registry calls a service's migration makes (Flyway SQL can call the
 * same functions): each runs one statement on [Connection] in the caller's
 * transaction. Binding, granting and configuring are the extension owner's;
 * creating a store is the table owner's.
 */
object IdempotencyAdmin {
    /** idem_create_store: creates the store table [table] (schema-qualified), owned by the caller. */
    fun createStore(connection: Connection, table: String): String = text(connection, "SELECT idempotency.idem_create_store(?)::text", table)

    /** idem_bind_store: keeps [namespace]'s records in [table] from now on. */
    fun bindStore(connection: Connection, namespace: ConsumerNamespace, table: String): String =
        text(connection, "SELECT idempotency.idem_bind_store(?, ?::regclass)::text", namespace.value, table)

    /** idem_grant: lets [role] (and its members) use [namespace]. */
    fun grant(connection: Connection, namespace: ConsumerNamespace, role: String): Boolean =
        text(connection, "SELECT idempotency.idem_grant(?, ?::regrole)::text", namespace.value, role) == "true"

    /** Lets [role] run purgeExpired (EXECUTE on idem_purge, which crosses namespaces). */
    fun grantPurge(connection: Connection, role: String) {
        connection.createStatement().use {
            it.execute("GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO " + quoteIdent(role))
        }
    }

    /**
     * idem_namespace_fingerprint: the parts of a request (RFC 6901 JSON Pointers,
     * such as "/trace_id") that [namespace]'s fingerprint ignores; empty restores
     * the whole request. Refused while the namespace has records.
     */
    fun ignoreInFingerprint(connection: Connection, namespace: ConsumerNamespace, pointers: List<String>) {
        connection.prepareStatement("SELECT 1 FROM idempotency.idem_namespace_fingerprint(?, ?)").use { ps ->
            ps.setString(1, namespace.value)
            ps.setArray(2, connection.createArrayOf("text", pointers.toTypedArray()))
            ps.executeQuery().close()
        }
    }

    /**
     * idem_namespace_configure: the namespace's whole configuration (a null
     * setting follows the server's default). A positive [inProgressLease] lets a
     * claim outlive its transaction (heartbeats, recovery points, takeovers).
     */
    fun configureNamespace(
        connection: Connection,
        namespace: ConsumerNamespace,
        replayWindow: Duration? = null,
        inProgressLease: Duration? = null,
        storeRequest: Boolean? = null,
        hashKeys: Boolean = false,
        maxPayloadBytes: Int? = null,
    ) {
        connection.prepareStatement(
            "SELECT 1 FROM idempotency.idem_namespace_configure(?, ?::interval, ?::interval, ?, ?, ?)",
        ).use { ps ->
            ps.setString(1, namespace.value)
            ps.setString(2, replayWindow?.let(ExposedRawIdempotencyStore::interval))
            ps.setString(3, inProgressLease?.let(ExposedRawIdempotencyStore::interval))
            if (storeRequest == null) ps.setNull(4, java.sql.Types.BOOLEAN) else ps.setBoolean(4, storeRequest)
            ps.setBoolean(5, hashKeys)
            if (maxPayloadBytes == null) ps.setNull(6, java.sql.Types.INTEGER) else ps.setInt(6, maxPayloadBytes)
            ps.executeQuery().close()
        }
    }

    private fun text(connection: Connection, sql: String, vararg params: String): String =
        connection.prepareStatement(sql).use { ps ->
            params.forEachIndexed { i, p -> ps.setString(i + 1, p) }
            ps.executeQuery().use { rs -> rs.next(); rs.getString(1) }
        }

    private fun quoteIdent(s: String) = "\"" + s.replace("\"", "\"\"") + "\""
}
