-- defaults.sql: the defaults of namespaces that set none (created once, by
-- an install or by the update to 1.0.0).

-- The settings of the namespaces that set none (idem_namespace_defaults):
-- one row, the only source of each default (1.0.0; the server settings that
-- said them before are gone). A namespace's own setting, and a call's
-- argument where a call may narrow it, come first.
CREATE TABLE idem_defaults (
    one                boolean PRIMARY KEY DEFAULT true CONSTRAINT idem_defaults_one_row CHECK (one),
    replay_window      interval NOT NULL DEFAULT interval '24 hours',
    in_progress_lease  interval NOT NULL DEFAULT interval '0',
    store_request      boolean NOT NULL DEFAULT true,
    max_payload_bytes  integer NOT NULL DEFAULT 16777216,
    in_flight_wait     interval NOT NULL DEFAULT interval '0',
    require_registered boolean NOT NULL DEFAULT false,
    configured_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idem_defaults_replay_window_check
        CHECK (replay_window > interval '0' AND replay_window < interval '10000 years'),
    CONSTRAINT idem_defaults_lease_check
        CHECK (in_progress_lease >= interval '0' AND in_progress_lease < interval '100 years'),
    CONSTRAINT idem_defaults_max_payload_bytes_check CHECK (max_payload_bytes > 0),
    CONSTRAINT idem_defaults_in_flight_wait_check
        CHECK (in_flight_wait >= interval '0' AND in_flight_wait <= interval '2147483647 milliseconds')
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_defaults', '');

-- The row, with the values of the server settings that said these defaults
-- until 1.0.0, as they stand where the script runs (the server's, this
-- database's and this role's; a session cannot set them), in their base
-- units: an installation keeps the defaults it ran with. Other databases'
-- and roles' values are named by the update (docs/operations.md).
INSERT INTO idem_defaults (replay_window, in_progress_lease, store_request, max_payload_bytes, in_flight_wait,
                           require_registered)
SELECT coalesce(pg_catalog.make_interval(secs => s.replay_window), interval '24 hours'),
       coalesce(pg_catalog.make_interval(secs => s.in_progress_lease), interval '0'),
       coalesce(s.store_request, true),
       coalesce(s.max_payload_bytes, 16777216),
       coalesce(pg_catalog.make_interval(secs => s.in_flight_wait / 1000.0), interval '0'),
       coalesce(s.require_registered, false)
FROM (SELECT pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.replay_window')::pg_catalog.float8 AS replay_window,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.in_progress_lease')::pg_catalog.float8 AS in_progress_lease,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.store_request')::boolean AS store_request,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.max_payload_bytes')::integer AS max_payload_bytes,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.in_flight_wait')::pg_catalog.float8 AS in_flight_wait,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.require_registered_namespace')::boolean AS require_registered
      FROM pg_catalog.pg_settings g WHERE g.name OPERATOR(pg_catalog.~~) 'idempotency.%') s;
