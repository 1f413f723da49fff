// @idempotency/pg: the idempotency extension's store on node-postgres.
export { IdempotencyError, IncompatibleServerError } from './errors.js';
export { mint, parse, validateNamespace } from './keys.js';
export { API_MAJOR, Namespace, checkServer, type BeginOptions, type Queryable, type ServerVersion } from './namespace.js';
export type { Fresh, InFlight, Json, Mismatch, Outcome, PriorError, PriorResult, RecordedError } from './outcome.js';
export type { HttpResponse, IdempotencyContext, IdempotencyOptions, PoolClientLike, PoolLike } from './http.js';
export { recordByDefault, routeTemplate } from './http.js';
