-- script/end.sql: the end of the portable edition's plain script: the
-- version table that a later release's update script checks and moves
-- (readable by everyone, as idem_version() is), then the transaction's end.
CREATE TABLE idempotency_internal.idem_script_version (
    one          boolean PRIMARY KEY DEFAULT true CONSTRAINT idem_script_version_one_row CHECK (one),
    edition      text NOT NULL,
    version      text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz
);
INSERT INTO idempotency_internal.idem_script_version (edition, version) VALUES ('@edition@', '@version@');
REVOKE ALL ON idempotency_internal.idem_script_version FROM PUBLIC;
GRANT SELECT ON idempotency_internal.idem_script_version TO PUBLIC;
COMMIT;
