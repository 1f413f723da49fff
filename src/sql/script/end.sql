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
-- Only the owner writes it, whatever default privileges gave others.
DO $revoke$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END
                   FROM pg_catalog.pg_class c
                   CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
                   LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
                   WHERE c.oid = 'idempotency_internal.idem_script_version'::pg_catalog.regclass AND a.grantee <> c.relowner LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON idempotency_internal.idem_script_version FROM %s', grantee);
    END LOOP;
END;
$revoke$;
GRANT SELECT ON idempotency_internal.idem_script_version TO PUBLIC;
COMMIT;
