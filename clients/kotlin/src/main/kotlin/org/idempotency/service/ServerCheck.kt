package org.idempotency.service

import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyErrorCodec
import java.sql.Connection

/**
 * The first-use check of a factory, run once in the caller's transaction with
 * statements that cannot fail on privileges: the server's API major (this
 * library knows 1), the store table, and, where the role may read
 * idem_namespaces, that the namespace is bound to it.
 */
internal class ServerCheck(private val tableName: String) {
    @Volatile
    private var passed = false

    /** Null when the server and the store are as the factory says, else the error to fail with. */
    fun problem(connection: Connection, namespace: ConsumerNamespace, errors: IdempotencyErrorCodec): Throwable? {
        if (passed) return null
        val (schema, name) = splitName(tableName)
        val storeSql = if (schema == null) {
            "to_regclass(?)::oid::bigint"
        } else {
            "(SELECT c.oid::bigint FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace " +
                "WHERE n.nspname = ? AND c.relname = ?)"
        }
        var installed: String? = null
        var versioned = false
        var store: Long? = null
        var canRead = false
        connection.prepareStatement(
            "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'idempotency') AS installed, " +
                "to_regprocedure('idempotency.idem_version()') IS NOT NULL AS versioned, " +
                "$storeSql AS store, " +
                "CASE WHEN to_regclass('idempotency.idem_namespaces') IS NULL THEN false " +
                "ELSE has_table_privilege(to_regclass('idempotency.idem_namespaces'), 'SELECT') END AS can_read",
        ).use { ps ->
            if (schema == null) ps.setString(1, tableName) else { ps.setString(1, schema); ps.setString(2, name) }
            ps.executeQuery().use { rs ->
                rs.next()
                installed = rs.getString("installed")
                versioned = rs.getBoolean("versioned")
                store = rs.getLong("store").takeIf { !rs.wasNull() }
                canRead = rs.getBoolean("can_read")
            }
        }
        // idem_version() decides, not pg_extension: the portable edition's plain script
        // installs the store without an extension (docs/managed.md, route 2).
        if (installed == null && !versioned) {
            return errors.implementation(
                "the idempotency extension is not installed in this database: a DBA runs CREATE EXTENSION idempotency, " +
                    "or, on a managed PostgreSQL that cannot load it, the portable edition's script (docs/managed.md)", null,
            )
        }
        if (!versioned) {
            return errors.implementation(
                "the idempotency extension here is release $installed, older than 1.0.0 (it has no idem_version()): " +
                    "run ALTER EXTENSION idempotency UPDATE", null,
            )
        }
        connection.prepareStatement("SELECT edition, version, api FROM idempotency.idem_version()").use { ps ->
            ps.executeQuery().use { rs ->
                rs.next()
                val api = rs.getString("api")
                if (api.substringBefore('.') != "1") {
                    return errors.implementation(
                        "the idempotency server speaks API $api (edition ${rs.getString("edition")}, release " +
                            "${rs.getString("version")}); this library knows API 1.x: use a release of it made for API $api", null,
                    )
                }
            }
        }
        if (store == null) {
            return errors.implementation(
                "the idempotency store $tableName does not exist (or this role cannot see it): the service's migration " +
                    "creates it (idempotency.idem_create_store) and binds namespace $namespace to it (idempotency.idem_bind_store)", null,
            )
        }
        if (canRead) {
            connection.prepareStatement(
                "SELECT store::oid::bigint AS store, store::text AS name FROM idempotency.idem_namespaces WHERE namespace = ?",
            ).use { ps ->
                ps.setString(1, namespace.value)
                ps.executeQuery().use { rs ->
                    val bound = if (rs.next()) rs.getLong("store").takeIf { !rs.wasNull() } to rs.getString("name") else null to null
                    if (bound.first != store) {
                        val where = bound.second?.let { "to $it" } ?: "to no store of its own (its records would go to the extension's table)"
                        return errors.implementation(
                            "idempotency namespace $namespace is bound $where, not to $tableName: the service's migration " +
                                "binds it with idempotency.idem_bind_store('$namespace', '$tableName')", null,
                        )
                    }
                }
            }
        }
        passed = true
        return null
    }

    companion object {
        /** Schema and table of a name as PostgreSQL reads it: unquoted parts folded to lower case. */
        fun splitName(name: String): Pair<String?, String> {
            val parts = mutableListOf<String>()
            var i = 0
            while (i < name.length) {
                if (name[i] == '"') {
                    val sb = StringBuilder()
                    i++
                    while (i < name.length) {
                        if (name[i] == '"') {
                            if (i + 1 < name.length && name[i + 1] == '"') { sb.append('"'); i += 2; continue }
                            i++
                            break
                        }
                        sb.append(name[i]); i++
                    }
                    parts += sb.toString()
                } else {
                    val end = name.indexOf('.', i).let { if (it < 0) name.length else it }
                    parts += name.substring(i, end).lowercase()
                    i = end
                }
                if (i < name.length && name[i] == '.') i++
            }
            return if (parts.size == 2) parts[0] to parts[1] else null to parts[0]
        }
    }
}
