-- defaults.sql: the defaults of namespaces that set none (created once, by
-- an install or by the update to 1.0.0).

-- The settings of the namespaces that set none (idem_namespace_defaults):
-- at most one row, the only source of each default (1.0.0; the server
-- settings that said them before are gone); no row, the column defaults.
-- A new installation has none, so that a restored dump's row is the only
-- one. A namespace's own setting, and a call's
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
