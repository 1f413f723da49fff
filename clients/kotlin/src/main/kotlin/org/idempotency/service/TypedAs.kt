package org.idempotency.service

import kotlinx.serialization.json.Json
import kotlinx.serialization.serializer

/**
 * The typed store over this one: resolves the serializers of [Req] and [Res]
 * once, here, and encodes and decodes with [json] (keep its configuration
 * stable across deployments: it decides what a recorded result decodes to).
 */
inline fun <reified Req, reified Res> RawIdempotencyStore.typedAs(json: Json = Json): IdempotencyStore<Req, Res> =
    IdempotencyStoreImpl(this, json, serializer<Req>(), serializer<Res>())

/**
 * A factory of typed stores, made once at wiring time: [inTransaction],
 * [inConnection] and [withTx] bind as the raw factory's do.
 */
inline fun <reified Req, reified Res> IdempotencyStoreFactory.typedAs(json: Json = Json): TypedIdempotencyStoreFactory<Req, Res> =
    TypedIdempotencyStoreFactory(this, json, serializer<Req>(), serializer<Res>())
