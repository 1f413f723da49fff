package org.example.payments

// A handler written for the specification's library. Moving to this one
// changed these imports, and nothing below them:
//   cards.arda.common.lib.runtime.idempotency.core.*    -> org.idempotency.core.*
//   cards.arda.common.lib.runtime.idempotency.service.* -> org.idempotency.service.*
//   (Exposed 1.x: org.jetbrains.exposed.sql.*           -> org.jetbrains.exposed.v1.*)
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyKey
import org.idempotency.core.IdempotencyKeyMinter
import org.idempotency.core.parseIdempotencyKey
import org.idempotency.service.IdempotencyStore
import org.idempotency.service.IdempotencyStoreFactory
import org.idempotency.service.TypedIdempotencyOutcome
import org.idempotency.service.typedAs
import org.jetbrains.exposed.v1.core.Table
import org.jetbrains.exposed.v1.jdbc.JdbcTransaction
import org.jetbrains.exposed.v1.jdbc.insert

@Serializable
data class PaymentRequest(val tenant: String, val invoice: String, val amount: Long)

@Serializable
data class PaymentReceipt(val paymentId: Long, val amount: Long, val providerKey: String)

data class Reply(val status: Int, val body: String)

class ProviderUnavailable : RuntimeException("payment provider unavailable")

/** The payment provider: charges once per idempotency key; false when the balance is too low. */
interface PaymentProvider {
    fun charge(idempotencyKey: String, amount: Long): Boolean
}

object Payments : Table("payments") {
    val id = long("id").autoIncrement()
    val amount = long("amount")
    override val primaryKey = PrimaryKey(id)
}

/** POST /payments with an Idempotency-Key header, in the caller's Exposed transaction. */
class PaymentHandler(
    private val factory: IdempotencyStoreFactory,
    private val json: Json,
    private val provider: PaymentProvider,
) {
    private val namespace = ConsumerNamespace("payments")
    private val outbound = IdempotencyKeyMinter(namespace)

    fun handle(tx: JdbcTransaction, header: String?, request: PaymentRequest): Reply {
        val key = parseIdempotencyKey(namespace, header).getOrElse { e ->
            return if (e is AppError.Invocation.GeneralValidation) Reply(400, e.message!!) else throw e
        } ?: return Reply(400, "an Idempotency-Key header is required")
        val store = factory.withTx(tx).typedAs<PaymentRequest, PaymentReceipt>(json)
        val outcome = store.begin(key, request).getOrElse { e ->
            return when (e) {
                is AppError.Internal.IncompatibleState -> Reply(500, "stored state drifted: ${e.message}")
                else -> throw e
            }
        }
        return when (outcome) {
            is TypedIdempotencyOutcome.FreshAttempt -> attempt(store, key, request)
            is TypedIdempotencyOutcome.InFlight -> Reply(409, "already in progress; retry later")
            is TypedIdempotencyOutcome.PriorResult -> Reply(200, json.encodeToString(PaymentReceipt.serializer(), outcome.value))
            is TypedIdempotencyOutcome.PriorError -> Reply(422, "${outcome.error::class.simpleName}: ${outcome.error.message}")
            is TypedIdempotencyOutcome.Mismatch ->
                Reply(422, "key reused for another request (first: invoice ${outcome.recordedRequest.getOrNull()?.invoice})")
        }
    }

    private fun attempt(store: IdempotencyStore<PaymentRequest, PaymentReceipt>, key: IdempotencyKey, request: PaymentRequest): Reply {
        val providerKey = outbound.mint(listOf(request.tenant, request.invoice)).getOrThrow()
        return try {
            if (!provider.charge(providerKey.value, request.amount)) {
                val error = AppError.Conflict.InsufficientFunds("balance too low for ${request.amount}")
                store.failPermanent(key, error).getOrThrow()
                Reply(422, "InsufficientFunds: ${error.message}")
            } else {
                val id = Payments.insert { it[amount] = request.amount }[Payments.id]
                val receipt = PaymentReceipt(id, request.amount, providerKey.value)
                store.commit(key, receipt).getOrThrow()
                Reply(201, json.encodeToString(PaymentReceipt.serializer(), receipt))
            }
        } catch (e: ProviderUnavailable) {
            store.failTransient(key).getOrThrow()
            Reply(503, "provider unavailable; retry")
        }
    }
}
