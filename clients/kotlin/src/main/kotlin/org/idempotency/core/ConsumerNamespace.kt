package org.idempotency.core

/**
 * A consumer's keyspace: 1 to 64 characters of a-z, 0-9, "-" and "_", checked
 * at construction exactly as the server checks it (an [InvalidNamespaceException]
 * with the server's message and detail otherwise).
 */
@JvmInline
value class ConsumerNamespace(val value: String) {
    init {
        KeyRules.checkNamespace(value)?.let { throw InvalidNamespaceException(it.message, it.detail) }
    }

    override fun toString(): String = value

    companion object {
        /** The namespace, or a failure carrying the [InvalidNamespaceException]. */
        fun of(value: String): Result<ConsumerNamespace> = runCatching { ConsumerNamespace(value) }
    }
}
