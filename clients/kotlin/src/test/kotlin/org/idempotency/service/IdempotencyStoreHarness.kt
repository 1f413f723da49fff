package org.idempotency.service

import org.flywaydb.core.Flyway
import org.idempotency.core.ConsumerNamespace
import org.jetbrains.exposed.v1.jdbc.Database
import java.sql.Connection
import java.sql.DriverManager
import java.util.UUID

/**
 * A database of its own on the server the PG* variables name: the extension
 * installed (as a DBA would), a login role for the service, and the
 * consumer's Flyway migration applied (test resources db/idempotency). Each
 * scenario gets a clean store ([clean]); [close] drops the database and role.
 */
class IdempotencyStoreHarness(
    val namespace: ConsumerNamespace = ConsumerNamespace("orders"),
    val store: String = "public.idempotency_record",
    migrate: Boolean = true,
    extensionVersion: String? = "",
) : AutoCloseable {
    private val suffix = UUID.randomUUID().toString().replace("-", "").take(10)
    val database = "idem_kt_$suffix"
    val appRole = "idem_kt_app_$suffix"
    private val opened = mutableListOf<Connection>()

    init {
        superuser("postgres").use { c ->
            c.createStatement().use {
                it.execute("CREATE DATABASE $database")
                it.execute("CREATE ROLE $appRole LOGIN")
            }
        }
        // A DBA installs the extension once ("" is the default version; null: none),
        // unless the server's new databases come with the store already
        // (IDEM_TEST_STORE_IN_TEMPLATE=1: test/bin/portable's clients layer, the
        // portable edition's plain script installed in template1).
        if (extensionVersion != null && !(extensionVersion.isEmpty() && env("IDEM_TEST_STORE_IN_TEMPLATE") == "1")) {
            val version = if (extensionVersion.isEmpty()) "" else " VERSION '$extensionVersion'"
            admin().use { c -> c.createStatement().use { it.execute("CREATE EXTENSION idempotency$version") } }
        }
        if (migrate) migrate("classpath:db/idempotency")
    }

    /** Applies the Flyway migrations at [locations] as the database's owner. */
    fun migrate(vararg locations: String, placeholders: Map<String, String> = emptyMap(), target: String? = null) {
        Flyway.configure()
            .apply { if (target != null) target(target) }
            .dataSource(url(database), user(), password())
            .locations(*locations)
            .placeholders(mapOf("store" to store, "namespace" to namespace.value, "app_role" to appRole) + placeholders)
            .load()
            .migrate()
    }

    /** A superuser connection to this database, in autocommit mode. */
    fun admin(): Connection = superuser(database)

    /** A connection as the service's role, with a transaction open (autocommit off); closed by [close]. */
    fun app(autoCommit: Boolean = false): Connection =
        DriverManager.getConnection(url(database), appRole, password()).also {
            it.autoCommit = autoCommit
            synchronized(opened) { opened += it }
        }

    /** Exposed on this database, as the service's role. */
    fun exposed(): Database = Database.connect(url(database), driver = "org.postgresql.Driver", user = appRole, password = password() ?: "")

    /** Empties the store: a clean table per scenario. */
    fun clean() { execute("TRUNCATE $store") }

    /** Runs [sql] as a superuser in this database and returns the first column of its rows. */
    fun query(sql: String): List<String?> = admin().use { c ->
        c.createStatement().use { st ->
            st.executeQuery(sql).use { rs -> buildList { while (rs.next()) add(rs.getString(1)) } }
        }
    }

    /** Runs [sql] as a superuser in this database. */
    fun execute(sql: String) { admin().use { c -> c.createStatement().use { it.execute(sql) } } }

    override fun close() {
        synchronized(opened) { opened.forEach { runCatching { it.close() } } }
        superuser("postgres").use { c ->
            c.createStatement().use {
                it.execute("DROP DATABASE IF EXISTS $database WITH (FORCE)")
                it.execute("DROP ROLE IF EXISTS $appRole")
            }
        }
    }

    companion object {
        private fun env(name: String) = System.getenv(name)?.takeIf { it.isNotEmpty() }

        /** pgJDBC speaks TCP: a PGHOST that is a socket directory means this machine. */
        private fun host(): String = env("PGHOST")?.takeUnless { it.startsWith("/") } ?: "127.0.0.1"
        fun user(): String = env("PGUSER") ?: System.getProperty("user.name")
        fun password(): String? = env("PGPASSWORD")
        fun url(db: String) = "jdbc:postgresql://${host()}:${env("PGPORT") ?: "5432"}/$db"
        fun superuser(db: String): Connection = DriverManager.getConnection(url(db), user(), password())
    }
}
