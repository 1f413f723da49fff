-- triggers.native.sql: the registry's triggers and the guard against
-- dropping a bound store (made once; their functions are in
-- registry.native.sql and stores.native.sql).

CREATE TRIGGER idem_namespace_config_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_namespace_config
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency_internal.idem_namespace_changed();
CREATE TRIGGER idem_namespace_grant_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_namespace_grant
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency_internal.idem_namespace_changed();
CREATE TRIGGER idem_defaults_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_defaults
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency_internal.idem_namespace_changed();
CREATE TRIGGER idem_namespace_config_locked
    BEFORE UPDATE OR DELETE ON idem_namespace_config
    FOR EACH ROW EXECUTE FUNCTION idempotency_internal.idem_namespace_config_locked();

CREATE EVENT TRIGGER idem_refuse_dropping_a_store ON sql_drop
    EXECUTE FUNCTION idempotency_internal.idem_refuse_dropping_a_store();
