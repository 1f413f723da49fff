// Flow.java: docs/clients.md's pgJDBC guide, run through pgJDBC with its
// defaults (autocommit on, setString binding varchar, server-side prepared
// statements after five uses) against the database test/clients/run
// prepared, and Jackson for JSON. The regions between "snippet:" and
// "end snippet" are the guide's code (test/clients/snippets.py checks that
// they are); the rest checks what the guide promises, and what it warns
// about, and prints TAP. Run as a source file: java -cp <jars> Flow.java.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

public class Flow {
    // snippet: flow
    static final String NAMESPACE = "payments";
    static final ObjectMapper JSON = new ObjectMapper();

    record PaymentRequest(BigDecimal amount, String currency) {}
    record Response(int status, Map<String, String> headers, JsonNode body) {}
    static class ProviderUnavailable extends Exception {}
    interface Provider { void charge(String key, PaymentRequest request) throws Exception; }

    // POST /payments: header is the Idempotency-Key field (null when absent).
    static Response createPayment(DataSource db, String header, PaymentRequest request, Provider provider)
            throws Exception {
        try (Connection c = db.getConnection()) {
            String key;
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT key, status, body FROM idempotency.idem_http_key(?, ?)")) {
                ps.setString(1, NAMESPACE);
                ps.setString(2, header);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    key = rs.getString("key");
                    if (key == null) {   // 400
                        return new Response(rs.getInt("status"), Map.of(), JSON.readTree(rs.getString("body")));
                    }
                }
            }
            c.setAutoCommit(false);
            try {
                Response response = attempt(c, key, request, provider);
                c.commit();
                return response;
            } catch (Exception e) {
                c.rollback();   // the claim goes with the work: a retry starts fresh
                throw e;
            }
        }
    }

    static Response attempt(Connection c, String key, PaymentRequest request, Provider provider)
            throws Exception {
        String kind;
        long fence;
        JsonNode result, error;
        // setString binds varchar, which no function takes for jsonb: say ?::jsonb.
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT kind, result, error, fence FROM idempotency.idem_begin(?, ?, ?::jsonb)")) {
            ps.setString(1, NAMESPACE);
            ps.setString(2, key);
            ps.setString(3, JSON.writeValueAsString(
                    Map.of("method", "POST", "target", "/payments", "body", request)));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                kind = rs.getString("kind");
                result = json(rs.getString("result"));
                error = json(rs.getString("error"));
                fence = rs.getLong("fence");
            }
        }
        switch (kind) {
            case "prior_result":
                return new Response(result.get("status").asInt(), Map.of("Idempotency-Replayed", "true"),
                                    result.get("body"));
            case "prior_error":
                return new Response(422, Map.of("Idempotency-Replayed", "true"), JSON.createObjectNode()
                        .put("code", error.get("class_tag").asText()).put("detail", error.get("message").asText()));
            case "in_flight":
                return new Response(409, Map.of("Retry-After", "1"),
                                    JSON.createObjectNode().put("code", "IDEMPOTENCY_REQUEST_IN_PROGRESS"));
            case "mismatch":
                return new Response(422, Map.of(), JSON.createObjectNode()
                        .put("code", "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"));
        }
        // fresh: this transaction holds the key and must finish it before commit().
        if (request.amount().signum() <= 0) {
            Map<String, String> refusal = Map.of("class_tag", "InvalidAmount", "message", "amount must be positive");
            execute(c, "SELECT idempotency.idem_fail_permanent(?, ?, ?::jsonb, ?)",
                    NAMESPACE, key, JSON.writeValueAsString(refusal), fence);
            return new Response(422, Map.of(), JSON.createObjectNode()
                    .put("code", refusal.get("class_tag")).put("detail", refusal.get("message")));
        }
        try {
            provider.charge(key, request);
        } catch (ProviderUnavailable e) {
            // Keep the outage on record and release the key: the retry starts fresh.
            execute(c, "INSERT INTO provider_outages (idempotency_key) VALUES (?)", key);
            execute(c, "SELECT idempotency.idem_fail_transient(?, ?, ?)", NAMESPACE, key, fence);
            return new Response(503, Map.of("Retry-After", "1"),
                                JSON.createObjectNode().put("code", "PROVIDER_UNAVAILABLE"));
        }
        long paymentId;
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO payments (amount, currency) VALUES (?, ?) RETURNING id")) {
            ps.setBigDecimal(1, request.amount());
            ps.setString(2, request.currency());
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                paymentId = rs.getLong("id");
            }
        }
        JsonNode body = JSON.createObjectNode().put("payment_id", paymentId);
        execute(c, "SELECT idempotency.idem_commit(?, ?, ?::jsonb, ?)", NAMESPACE, key,
                JSON.writeValueAsString(Map.of("status", 201, "body", body)), fence);
        return new Response(201, Map.of(), body);
    }

    static JsonNode json(String text) throws Exception {
        return text == null ? null : JSON.readTree(text);
    }

    static void execute(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) ps.setObject(i + 1, params[i]);
            ps.execute();
        }
    }
    // end snippet

    // snippet: typed
    record RefundReceipt(int refundId, BigDecimal amount) {}

    // A refund recorded as the composite type refund_receipt; its request is the amount.
    // setBigDecimal binds numeric, so idem_begin_typed's anyelement needs no cast.
    static RefundReceipt refund(DataSource db, String key, BigDecimal amount) throws Exception {
        try (Connection c = db.getConnection()) {
            c.setAutoCommit(false);
            try {
                RefundReceipt receipt = null;
                String kind;
                long fence;
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT o.kind, o.fence, r.refund_id, r.amount"
                        + " FROM idempotency.idem_begin_typed('refunds', ?, ?) o,"
                        + "      idempotency.idem_result(o, NULL::refund_receipt) r")) {
                    ps.setString(1, key);
                    ps.setBigDecimal(2, amount);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        kind = rs.getString("kind");
                        fence = rs.getLong("fence");
                        if (kind.equals("prior_result")) {
                            receipt = new RefundReceipt(rs.getInt("refund_id"), rs.getBigDecimal("amount"));
                        }
                    }
                }
                if (kind.equals("fresh")) {
                    try (PreparedStatement ps = c.prepareStatement(
                            "INSERT INTO refunds (amount) VALUES (?) RETURNING id, amount")) {
                        ps.setBigDecimal(1, amount);
                        try (ResultSet rs = ps.executeQuery()) {
                            rs.next();
                            receipt = new RefundReceipt(rs.getInt("id"), rs.getBigDecimal("amount"));
                        }
                    }
                    execute(c, "SELECT idempotency.idem_commit_typed(?, ?, ROW(?, ?)::refund_receipt, ?)",
                            "refunds", key, receipt.refundId(), receipt.amount(), fence);
                } else if (receipt == null) {
                    throw new IllegalStateException("refund " + key + " is " + kind);
                }
                c.commit();
                return receipt;
            } catch (Exception e) {
                c.rollback();
                throw e;
            }
        }
    }
    // end snippet

    // snippet: errors
    // getSQLState() is the SQLSTATE; the server's detail and hint are in its
    // ServerErrorMessage (getMessage() also prints them, after the message).
    static Map<String, String> describe(SQLException e) {
        Map<String, String> d = new LinkedHashMap<>();
        d.put("sqlstate", e.getSQLState());
        ServerErrorMessage m = e instanceof PSQLException p ? p.getServerErrorMessage() : null;
        if (m != null) {
            d.put("message", m.getMessage());
            d.put("detail", m.getDetail());
            d.put("hint", m.getHint());
        }
        return d;
    }
    // end snippet

    // snippet: recipes
    // docs/usage.md's HTTP handler: one statement, its own transaction in autocommit mode.
    static Response createPaymentInSql(DataSource db, String header, String requestJson) throws Exception {
        try (Connection c = db.getConnection();
             PreparedStatement ps = c.prepareStatement(
                     "SELECT status, headers, body FROM create_payment(?, ?::jsonb)")) {
            ps.setString(1, header);
            ps.setString(2, requestJson);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                Map<String, String> headers = JSON.convertValue(json(rs.getString("headers")),
                        JSON.getTypeFactory().constructMapType(Map.class, String.class, String.class));
                return new Response(rs.getInt("status"), headers, json(rs.getString("body")));
            }
        }
    }

    // docs/usage.md's stored procedure commits: CALL it in autocommit mode, as a
    // plain statement ({call ...} would turn it into a SELECT).
    static void transfer(DataSource db, String key, int fromId, int toId, BigDecimal amount) throws SQLException {
        try (Connection c = db.getConnection();
             PreparedStatement ps = c.prepareStatement("CALL transfer(?, ?, ?, ?)")) {
            ps.setString(1, key);
            ps.setInt(2, fromId);
            ps.setInt(3, toId);
            ps.setBigDecimal(4, amount);
            ps.execute();
        }
    }
    // end snippet

    // ---- the checks ----
    static int count = 0, failed = 0;

    static void ok(boolean cond, String name, Object diag) {
        count++;
        if (!cond) failed++;
        System.out.println((cond ? "ok " : "not ok ") + count + " - " + name);
        if (!cond && diag != null) System.err.println("# " + diag);
    }

    interface Action { void run() throws Exception; }

    static Exception failure(Action a) {
        try {
            a.run();
        } catch (Exception e) {
            return e;
        }
        return null;
    }

    static String state(Exception e) {
        return e instanceof SQLException s ? s.getSQLState() : null;
    }

    static DataSource source(String extra) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(System.getenv("JDBC_URL") + extra);
        return ds;
    }

    static long scalar(DataSource db, String sql) throws Exception {
        try (Connection c = db.getConnection(); PreparedStatement ps = c.prepareStatement(sql);
             ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    static String text(DataSource db, String sql, Object... params) throws Exception {
        try (Connection c = db.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) ps.setObject(i + 1, params[i]);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        DataSource db = source("");
        List<Exception> failNext = new ArrayList<>();
        Provider provider = (key, request) -> {
            if (!failNext.isEmpty()) throw failNext.remove(0);
        };
        PaymentRequest eur100 = new PaymentRequest(new BigDecimal("100"), "EUR");
        long before = scalar(db, "SELECT count(*) FROM payments");

        Response r = createPayment(db, null, eur100, provider);
        ok(r.status() == 400 && r.body().get("code").asText().equals("MISSING_IDEMPOTENCY_KEY"),
           "no header: 400 MISSING_IDEMPOTENCY_KEY", r);
        r = createPayment(db, "\"jdbc-1", eur100, provider);
        ok(r.status() == 400 && r.body().get("code").asText().equals("INVALID_IDEMPOTENCY_KEY"),
           "unterminated quoted header: 400 INVALID_IDEMPOTENCY_KEY", r);

        Response first = createPayment(db, "jdbc-1", eur100, provider);
        ok(first.status() == 201 && first.body().get("payment_id").isIntegralNumber(), "fresh: 201 with the payment id", first);
        r = createPayment(db, "\"jdbc-1\"", eur100, provider);
        ok(r.status() == 201 && r.body().toString().equals(first.body().toString()) && "true".equals(r.headers().get("Idempotency-Replayed")),
           "retry (quoted header): the same 201 and body, flagged as a replay", r);
        r = createPayment(db, "jdbc-1", new PaymentRequest(new BigDecimal("999"), "EUR"), provider);
        ok(r.status() == 422 && r.body().get("code").asText().equals("IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"),
           "same key, other amount: 422 mismatch", r);

        try (Connection holder = db.getConnection()) {
            holder.setAutoCommit(false);
            String held;
            try (PreparedStatement ps = holder.prepareStatement(
                    "SELECT kind FROM idempotency.idem_begin(?, ?, ?::jsonb)")) {
                ps.setString(1, NAMESPACE);
                ps.setString(2, "jdbc-2");
                ps.setString(3, JSON.writeValueAsString(Map.of("method", "POST", "target", "/payments", "body", eur100)));
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    held = rs.getString(1);
                }
            }
            ok("fresh".equals(held), "another connection holds jdbc-2 in an open transaction", held);
            r = createPayment(db, "jdbc-2", eur100, provider);
            ok(r.status() == 409 && "1".equals(r.headers().get("Retry-After")), "while it is held: 409 with Retry-After", r);
            holder.rollback();
        }
        r = createPayment(db, "jdbc-2", eur100, provider);
        ok(r.status() == 201, "after the holder rolled back: fresh, 201", r);

        PaymentRequest refused = new PaymentRequest(new BigDecimal("-5"), "EUR");
        r = createPayment(db, "jdbc-3", refused, provider);
        ok(r.status() == 422 && r.body().get("code").asText().equals("InvalidAmount"),
           "a refused amount: 422 recorded with idem_fail_permanent", r);
        r = createPayment(db, "jdbc-3", refused, provider);
        ok(r.status() == 422 && r.body().get("code").asText().equals("InvalidAmount")
           && "true".equals(r.headers().get("Idempotency-Replayed")), "its retry: the same 422, replayed", r);

        failNext.add(new ProviderUnavailable());
        r = createPayment(db, "jdbc-4", eur100, provider);
        ok(r.status() == 503, "provider unavailable: 503 after idem_fail_transient", r);
        ok(text(db, "SELECT count(*) FROM provider_outages WHERE idempotency_key = ?", "jdbc-4").equals("1"),
           "the outage row committed with the released key", null);
        r = createPayment(db, "jdbc-4", eur100, provider);
        ok(r.status() == 201, "its retry: fresh, 201", r);

        failNext.add(new IllegalStateException("connection reset by the provider"));
        Exception e = failure(() -> createPayment(db, "jdbc-5", eur100, provider));
        ok(e instanceof IllegalStateException, "an unexpected error propagates after rollback()", e);
        r = createPayment(db, "jdbc-5", eur100, provider);
        ok(r.status() == 201, "its retry: fresh, 201 (the claim was rolled back)", r);
        ok(scalar(db, "SELECT count(*) FROM payments") - before == 4, "one payment per key that succeeded (jdbc-1, -2, -4, -5)", null);

        // Typed results.
        RefundReceipt receipt = refund(db, "rf-jdbc-1", new BigDecimal("25"));
        ok(receipt.amount().equals(new BigDecimal("25")), "typed: fresh refund recorded as refund_receipt", receipt);
        RefundReceipt again = refund(db, "rf-jdbc-1", new BigDecimal("25"));
        ok(again.equals(receipt), "typed: the retry decodes the same receipt with idem_result", again);
        ok(scalar(db, "SELECT count(*) FROM refunds") == 1, "typed: one refund row", null);
        String tuple = text(db, "SELECT idempotency.idem_result(o, NULL::refund_receipt)"
                                + " FROM idempotency.idem_begin_typed('refunds', 'rf-jdbc-1', 25::numeric) o");
        ok(tuple.equals("(" + receipt.refundId() + ",25)"), "a composite selected as one column arrives as a tuple string", tuple);

        // Errors: detail and hint.
        try (Connection c = db.getConnection()) { execute(c, "ALTER TYPE refund_receipt ADD ATTRIBUTE note text"); }
        e = failure(() -> refund(db, "rf-jdbc-1", new BigDecimal("25")));
        Map<String, String> d = e instanceof SQLException s ? describe(s) : Map.of();
        ok("ID001".equals(d.get("sqlstate"))
           && "incompatible stored state: the stored result does not fit type public.refund_receipt".equals(d.get("message"))
           && "At $: field \"note\" of type public.refund_receipt is missing from the stored value.".equals(d.get("detail"))
           && "The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.".equals(d.get("hint")),
           "a changed type: ID001 with the detail and hint api.md shows", d);
        ok(e != null && e.getMessage().contains("Detail: At $: field \"note\"") && e.getMessage().contains("Hint: The type changed"),
           "getMessage() includes the detail and the hint", e);
        try (Connection c = db.getConnection()) { execute(c, "ALTER TYPE refund_receipt DROP ATTRIBUTE note"); }

        // What the guide warns about, with the defaults.
        e = failure(() -> text(db, "SELECT kind FROM idempotency.idem_begin(?, ?, ?)", "payments", "jdbc-6", "{}"));
        ok("42883".equals(state(e)), "setString for a jsonb parameter without ?::jsonb: 42883", e);
        e = failure(() -> text(db, "SELECT kind FROM idempotency.idem_begin(?, ?, ?::jsonb, ?)", "payments", "jdbc-6", "{}", "1 hour"));
        ok("42883".equals(state(e)), "setString for the interval parameter without ?::interval: 42883", e);
        String window = text(db, "SELECT kind FROM idempotency.idem_begin(?, ?, ?::jsonb, ?::interval)"
                                 + " WHERE kind <> 'fresh'", "payments", "jdbc-1", "{}", "1 hour");
        ok("mismatch".equals(window), "?::interval: accepted", window);
        e = failure(() -> text(db, "SELECT idempotency.idem_grant(?, ?)", "jdbc-grants", "postgres"));
        ok("42883".equals(state(e)), "setString for the regrole parameter without ?::regrole: 42883", e);
        ok(text(db, "SELECT idempotency.idem_grant(?, ?::regrole)", "jdbc-grants", "postgres") != null, "?::regrole: accepted", null);
        String typedAsString = text(db, "SELECT kind FROM idempotency.idem_begin_typed('refunds', ?, ?)", "rf-jdbc-1", "25");
        ok("mismatch".equals(typedAsString), "setString for a typed request makes it a JSON string: mismatch", typedAsString);
        DataSource unspecified = source("&stringtype=unspecified");
        r = createPaymentInSqlUncast(unspecified, "jdbc-sql-2", "{\"amount\": 7, \"currency\": \"EUR\"}");
        ok(r.status() == 201, "stringtype=unspecified: create_payment(?, ?) without a cast works", r);
        e = failure(() -> createPaymentInSqlUncast(db, "jdbc-sql-3", "{\"amount\": 7, \"currency\": \"EUR\"}"));
        ok("42883".equals(state(e)), "by default, create_payment(?, ?) with setString: 42883", e);

        // docs/usage.md's recipes.
        r = createPaymentInSql(db, "jdbc-sql-1", "{\"amount\": 100, \"currency\": \"EUR\"}");
        ok(r.status() == 201 && r.body().get("payment_id").isIntegralNumber(), "usage.md's create_payment: 201", r);
        Response replay = createPaymentInSql(db, "jdbc-sql-1", "{\"currency\": \"EUR\", \"amount\": 100}");
        ok(replay.status() == 201 && replay.body().equals(r.body()) && "true".equals(replay.headers().get("Idempotency-Replayed")),
           "usage.md's create_payment: the retry replays", replay);
        transfer(db, "tr-jdbc", 1, 2, new BigDecimal("30"));
        transfer(db, "tr-jdbc", 1, 2, new BigDecimal("30"));
        String balances = text(db, "SELECT string_agg(balance::text, ',' ORDER BY id) FROM accounts");
        ok(balances.equals("40,60"), "usage.md's transfer, called twice: moved once", balances);
        e = failure(() -> {
            try (Connection c = db.getConnection(); CallableStatement cs = c.prepareCall("{call transfer(?, ?, ?, ?)}")) {
                transferArgs(cs, "tr-jdbc-2");
                cs.execute();
            }
        });
        ok("42809".equals(state(e)), "{call transfer(...)} by default: 42809", e);
        e = failure(() -> {
            try (Connection c = source("&escapeSyntaxCallMode=callIfNoReturn").getConnection();
                 CallableStatement cs = c.prepareCall("{call transfer(?, ?, ?, ?)}")) {
                transferArgs(cs, "tr-jdbc-2");
                cs.execute();
            }
        });
        ok(e == null, "{call transfer(...)} with escapeSyntaxCallMode=callIfNoReturn: works", e);
        e = failure(() -> {
            try (Connection c = db.getConnection()) {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("CALL transfer(?, ?, ?, ?)")) {
                    transferArgs(ps, "tr-jdbc-3");
                    ps.execute();
                }
            }
        });
        ok("2D000".equals(state(e)), "CALL with autocommit off (inside a transaction): 2D000", e);

        System.out.println("1.." + count);
        System.exit(failed == 0 ? 0 : 1);
    }

    // transfer(key, 1, 2, 1.00)'s arguments, for the ways of calling it.
    static void transferArgs(PreparedStatement ps, String key) throws SQLException {
        ps.setString(1, key);
        ps.setInt(2, 1);
        ps.setInt(3, 2);
        ps.setBigDecimal(4, BigDecimal.ONE);
    }

    static Response createPaymentInSqlUncast(DataSource db, String header, String requestJson) throws Exception {
        try (Connection c = db.getConnection();
             PreparedStatement ps = c.prepareStatement("SELECT status, headers, body FROM create_payment(?, ?)")) {
            ps.setString(1, header);
            ps.setString(2, requestJson);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return new Response(rs.getInt("status"), Map.of(), json(rs.getString("body")));
            }
        }
    }
}
