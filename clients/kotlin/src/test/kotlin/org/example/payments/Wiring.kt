package org.example.payments

import kotlinx.serialization.json.Json
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyErrorCodec
import org.idempotency.core.IdempotencyErrors
import org.idempotency.core.IdempotencyServerException
import org.idempotency.core.StoredAppError
import org.idempotency.service.IdempotencyStoreFactory
import java.sql.Connection
import kotlin.time.Duration.Companion.hours

/** The service's errors through the library: class tag to AppError and back. */
object AppErrorCodec : IdempotencyErrorCodec {
    override fun encode(error: Throwable) = StoredAppError(error::class.simpleName ?: "AppError", error.message.orEmpty(), error.cause?.message)

    override fun decode(stored: StoredAppError): Throwable? = when (stored.classTag) {
        "InsufficientFunds" -> AppError.Conflict.InsufficientFunds(stored.message)
        "GeneralValidation" -> AppError.Invocation.GeneralValidation(stored.message)
        else -> null
    }

    override fun generalValidation(message: String, detail: String?) =
        AppError.Invocation.GeneralValidation(if (detail == null) message else "$message: $detail")

    override fun incompatibleState(message: String, cause: Throwable?) = AppError.Internal.IncompatibleState(message, cause)
    override fun implementation(message: String, cause: Throwable?) = AppError.Internal.Implementation(message, cause)
    override fun serverError(error: IdempotencyServerException) = AppError.Internal.Implementation(error.message!!, error)
}

/** The wiring: what a service changes when it moves to this library (with its imports). */
object PaymentsWiring {
    fun handler(tableName: String, provider: PaymentProvider): PaymentHandler {
        IdempotencyErrors.codec = AppErrorCodec   // parseIdempotencyKey and the minter speak AppError too
        val factory = IdempotencyStoreFactory(tableName, ConsumerNamespace("payments"), 24.hours, errors = AppErrorCodec)
        return PaymentHandler(factory, Json, provider)
    }

    /** The scheduled purge, in its own transaction (EXECUTE on idem_purge granted by the migration). */
    fun purge(tableName: String, connection: Connection): Result<Int> =
        IdempotencyStoreFactory(tableName, ConsumerNamespace("payments"), 24.hours, errors = AppErrorCodec)
            .inConnection(connection).purgeExpired()
}
