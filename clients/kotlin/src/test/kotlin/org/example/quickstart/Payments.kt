package org.example.quickstart

import kotlinx.serialization.Serializable
import kotlinx.serialization.json.Json
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyError
import org.idempotency.core.parseIdempotencyKey
import org.idempotency.service.IdempotencyStoreFactory
import org.idempotency.service.TypedIdempotencyOutcome
import org.idempotency.service.typedAs
import org.jetbrains.exposed.v1.core.Table
import org.jetbrains.exposed.v1.jdbc.Database
import org.jetbrains.exposed.v1.jdbc.insert
import org.jetbrains.exposed.v1.jdbc.transactions.transaction
import kotlin.time.Duration.Companion.hours

@Serializable data class Charge(val amount: Long, val currency: String)
@Serializable data class Receipt(val paymentId: Long)
data class Reply(val status: Int, val body: String)

object Payments : Table("payments") {
    val id = long("id").autoIncrement()
    val amount = long("amount")
    val currency = text("currency")
}

val payments = ConsumerNamespace("payments")
val charges = IdempotencyStoreFactory("public.payment_keys", payments, 24.hours).typedAs<Charge, Receipt>(Json)

// POST /payments: runs the work once per Idempotency-Key, in the transaction that records its answer.
fun pay(db: Database, header: String?, charge: Charge): Reply = transaction(db) {
    val key = parseIdempotencyKey(payments, header).getOrElse { return@transaction Reply(400, it.message.orEmpty()) }
        ?: return@transaction Reply(400, "an Idempotency-Key header is required")
    val store = charges.withTx(this)
    when (val outcome = store.begin(key, charge).getOrThrow()) {
        is TypedIdempotencyOutcome.FreshAttempt -> if (charge.amount <= 0) {
            // Refused for good: recorded, so every retry gets this 422 again.
            store.failPermanent(key, IdempotencyError.Recorded("InvalidAmount", "amount must be positive")).getOrThrow()
            Reply(422, "amount must be positive")
        } else {
            val id = Payments.insert { it[amount] = charge.amount; it[currency] = charge.currency }[Payments.id]
            store.commit(key, Receipt(id)).getOrThrow()
            Reply(201, Json.encodeToString(Receipt(id)))
        }
        is TypedIdempotencyOutcome.PriorResult -> Reply(201, Json.encodeToString(outcome.value))
        is TypedIdempotencyOutcome.PriorError -> Reply(422, outcome.error.message.orEmpty())
        is TypedIdempotencyOutcome.InFlight -> Reply(409, "in progress; retry later")
        is TypedIdempotencyOutcome.Mismatch -> Reply(422, "this key was used for another request")
    }
}
