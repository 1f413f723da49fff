package org.idempotency.core

import kotlinx.serialization.SerialName
import kotlinx.serialization.Serializable

/**
 * A recorded permanent error as the store keeps it (the specification's
 * StoredAppError): a class tag, a message and an optional, non-recursive cause.
 * Its JSON form, `{"class_tag", "message", "cause"}`, is what idem_fail_permanent
 * accepts and what a spec library's `error_payload` already holds.
 */
@Serializable
data class StoredAppError(
    @SerialName("class_tag") val classTag: String,
    val message: String,
    val cause: String? = null,
)

/**
 * How this library speaks the service's own error type (the specification's
 * AppError, which it cannot depend on): recorded errors go through [encode] and
 * come back through [decode]; the library's own failures are made by the other
 * functions. [DefaultIdempotencyErrorCodec] uses [IdempotencyError].
 */
interface IdempotencyErrorCodec {
    /** The stored form of an error a handler records with failPermanent. */
    fun encode(error: Throwable): StoredAppError

    /** The error a PriorError replays, or null for a tag this codec does not know. */
    fun decode(stored: StoredAppError): Throwable?

    /** A caller's invalid input (a key, a namespace, a part): the spec's AppError.Invocation.GeneralValidation. */
    fun generalValidation(message: String, detail: String?): Throwable

    /** A stored value that no longer decodes: the spec's AppError.Internal.IncompatibleState. */
    fun incompatibleState(message: String, cause: Throwable?): Throwable

    /** A bug-class failure (wiring, an unknown recorded tag): the spec's AppError.Internal.Implementation. */
    fun implementation(message: String, cause: Throwable?): Throwable

    /** An error the server raised; by default the exception itself, with its SQLSTATE. */
    fun serverError(error: IdempotencyServerException): Throwable = error
}

/**
 * The default error hierarchy, shaped as the specification's AppError branches
 * this library produces. A service without an AppError of its own may import it
 * as one: `import org.idempotency.core.IdempotencyError as AppError`.
 */
sealed class IdempotencyError(message: String, cause: Throwable? = null) : RuntimeException(message, cause) {
    /** The tag this error is recorded under. */
    abstract val classTag: String

    /** Errors in what the caller passed. */
    sealed class Invocation(message: String, cause: Throwable? = null) : IdempotencyError(message, cause) {
        /** Invalid input; [detail] is the server's detail (which rule, where). */
        class GeneralValidation(message: String, val detail: String? = null) : Invocation(message) {
            override val classTag get() = "GeneralValidation"
            override fun toString() = "GeneralValidation: $message" + (detail?.let { " ($it)" } ?: "")
        }
    }

    /** Bug-class errors: the operator must act. */
    sealed class Internal(message: String, cause: Throwable? = null) : IdempotencyError(message, cause) {
        /** A stored result or request no longer decodes into its type: drain or migrate. */
        class IncompatibleState(message: String, cause: Throwable? = null) : Internal(message, cause) {
            override val classTag get() = "IncompatibleState"
        }

        /** Wiring errors and recorded errors whose tag is not known. */
        class Implementation(message: String, cause: Throwable? = null) : Internal(message, cause) {
            override val classTag get() = "Implementation"
        }
    }

    /** A domain error a handler records and replays under its own tag. */
    open class Recorded(override val classTag: String, message: String, val causeText: String? = null) :
        IdempotencyError(message) {
        override fun toString() = "$classTag: $message"
    }
}

/** The codec of [IdempotencyError]; other Throwables are recorded under their class's simple name. */
object DefaultIdempotencyErrorCodec : IdempotencyErrorCodec {
    override fun encode(error: Throwable): StoredAppError = when (error) {
        is IdempotencyError.Recorded -> StoredAppError(error.classTag, error.message.orEmpty(), error.causeText)
        is IdempotencyError -> StoredAppError(error.classTag, error.message.orEmpty(), error.cause?.toString())
        else -> StoredAppError(error.javaClass.simpleName.ifEmpty { error.javaClass.name }, error.message.orEmpty(), error.cause?.toString())
    }

    override fun decode(stored: StoredAppError): Throwable? = when (stored.classTag) {
        "GeneralValidation" -> IdempotencyError.Invocation.GeneralValidation(stored.message, stored.cause)
        "IncompatibleState" -> IdempotencyError.Internal.IncompatibleState(stored.message)
        "Implementation" -> IdempotencyError.Internal.Implementation(stored.message)
        else -> null
    }

    override fun generalValidation(message: String, detail: String?): Throwable =
        IdempotencyError.Invocation.GeneralValidation(message, detail)

    override fun incompatibleState(message: String, cause: Throwable?): Throwable =
        IdempotencyError.Internal.IncompatibleState(message, cause)

    override fun implementation(message: String, cause: Throwable?): Throwable =
        IdempotencyError.Internal.Implementation(message, cause)
}

/**
 * The codec the library uses where none is passed: top-level functions such as
 * [parseIdempotencyKey] have no other way to reach the service's own errors.
 * Set it once while wiring, before the first request.
 */
object IdempotencyErrors {
    @Volatile
    var codec: IdempotencyErrorCodec = DefaultIdempotencyErrorCodec

    /** A recorded error as the codec replays it: unknown tags become implementation errors with their message. */
    fun replay(stored: StoredAppError, codec: IdempotencyErrorCodec = this.codec): Throwable =
        codec.decode(stored) ?: codec.implementation(stored.message, null)
}

/**
 * An error the server raised, with its SQLSTATE, message, detail and hint kept
 * as the server sent them; [cause] is the driver's exception.
 */
class IdempotencyServerException(
    val sqlState: String?,
    val serverMessage: String,
    val detail: String?,
    val hint: String?,
    cause: Throwable?,
) : RuntimeException(
    buildString {
        append(serverMessage)
        if (sqlState != null) append(" (SQLSTATE ").append(sqlState).append(')')
        if (detail != null) append("\nDetail: ").append(detail)
        if (hint != null) append("\nHint: ").append(hint)
    },
    cause,
)

/** A namespace that breaks the rule, with the server's message and detail. */
class InvalidNamespaceException(val reason: String, val detail: String) : IllegalArgumentException("$reason: $detail")
