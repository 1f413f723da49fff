-- portable_setup: what sql/setup.sql leaves for the tests that follow it,
-- for the portable edition: the store installed (through pg_tle; the plain
-- script installed it in the database this one was made from) and the
-- database's search_path.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SELECT edition, version, api FROM idempotency.idem_version();
ALTER DATABASE :"DBNAME" SET search_path = public, idempotency;
