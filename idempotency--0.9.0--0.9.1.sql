/* idempotency--0.9.0--0.9.1.sql: release 0.9.1, a faster batch. The
   library's idem_begin_batch looks at a batch's keys through one read of
   the namespace's policy, one opened store and one index scan rescanned
   per key, and fingerprints strings faster; the answers are those of
   0.9.0. Nothing in the schema changes: a session still running 0.9.0's
   library keeps working after this update. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.9.1'" to load this file. \quit
