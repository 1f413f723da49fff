package org.example.payments

/** The service's own error hierarchy (the specification's AppError), which the library does not know. */
sealed class AppError(message: String, cause: Throwable? = null) : Exception(message, cause) {
    sealed class Invocation(message: String) : AppError(message) {
        class GeneralValidation(message: String) : Invocation(message)
    }

    sealed class Internal(message: String, cause: Throwable?) : AppError(message, cause) {
        class IncompatibleState(message: String, cause: Throwable? = null) : Internal(message, cause)
        class Implementation(message: String, cause: Throwable? = null) : Internal(message, cause)
    }

    sealed class Conflict(message: String) : AppError(message) {
        class InsufficientFunds(message: String) : Conflict(message)
    }
}
