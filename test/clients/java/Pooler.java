// Pooler.java: pgJDBC behind PgBouncer in transaction pooling, as
// docs/clients.md's section on poolers says to connect, and why. Run by
// test/pooler/run with JDBC_URL naming its PgBouncer (the driver's database
// through a pool of two server connections) and SERVER_PORT the server
// itself, for the checks; prints TAP. Run as a source file:
// java -cp <jars> Pooler.java.
//
// pgJDBC prepares a statement on the server (S_1, S_2, ...) from its fifth
// execution on a connection (prepareThreshold), counted per SQL text, and
// its own COMMIT at the first commit(); from then on it sends only the
// name. Behind transaction pooling the next transaction may run on another
// server connection, which has no such statement, or another client's of
// that name. The checks make a statement move deterministically: with two
// server connections, a second client holds one in an open transaction
// while the statement runs on the other, and a third holds that one when
// it runs again (each cleared first with DEALLOCATE ALL: statements of
// earlier clients stay on it; the two helpers use prepareThreshold=0, so
// that their own COMMITs leave nothing).
//
// - With prepareThreshold=0 (the guide's setting): the move works, and 8
//   connections paying 80 keys (each retried) over the pool of two get one
//   payment per key, with no error.
// - With the defaults: commit() names COMMIT on the server (seen there
//   directly). A transaction whose named statements are missing where it
//   lands fails at its BEGIN, which pgJDBC then prepares again with the
//   rest, and retries. But where another client's statement has the name,
//   it runs: before PgBouncer 1.21 (POOLER_MAX_PREPARED=0), client 1's S_3
//   runs client 2's S_3 with client 1's parameter. From 1.21 (max_prepared_statements > 0)
//   it works, and so do statements pgJDBC evicts from its cache: it closes
//   them with the protocol's Close message, which PgBouncer translates.
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

public class Pooler {
    // snippet: pooler
    // Behind PgBouncer in transaction or statement pooling: prepareThreshold=0
    // (or ?prepareThreshold=0 in the URL, or a pool's data source property),
    // so that pgJDBC never prepares a statement on the server by name.
    static DataSource throughPgBouncer(String url) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(url);
        ds.setPrepareThreshold(0);
        return ds;
    }
    // end snippet

    static final String NAMESPACE = "pooled";
    static final String BEGIN = "SELECT kind, result, fence FROM idempotency.idem_begin(?, ?, ?::jsonb)";
    static final boolean TRACKS_PREPARED = Integer.parseInt(System.getenv().getOrDefault("POOLER_MAX_PREPARED", "0")) > 0;

    static int count = 0;
    static int failed = 0;

    static void ok(boolean cond, String name, Object diag) {
        count++;
        if (!cond) failed++;
        System.out.println((cond ? "ok " : "not ok ") + count + " - " + name);
        if (!cond && diag != null) System.err.println("# " + diag);
    }

    // With pgJDBC's defaults: PgBouncer, or the server itself (for the checks).
    static DataSource source(String url) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(url);
        return ds;
    }

    static String[] begin(Connection c, String key) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(BEGIN)) {
            ps.setString(1, NAMESPACE);
            ps.setString(2, key);
            ps.setString(3, "{\"amount\": 100}");
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return new String[] {rs.getString("kind"), rs.getString("result"), rs.getString("fence")};
            }
        }
    }

    static long scalar(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    // The guide's flow, reduced: begin, a payment, commit, in one transaction.
    // Returns the payment's id (recorded, or replayed).
    static long pay(Connection c, String key) throws SQLException {
        c.setAutoCommit(false);
        try {
            String[] o = begin(c, key);
            long payment;
            if (o[0].equals("prior_result")) {
                payment = Long.parseLong(o[1].replaceAll("[^0-9]", ""));
            } else if (o[0].equals("fresh")) {
                payment = scalar(c, "INSERT INTO payments (amount, currency) VALUES (100, 'EUR') RETURNING id");
                try (PreparedStatement ps = c.prepareStatement("SELECT idempotency.idem_commit(?, ?, ?::jsonb, ?)")) {
                    ps.setString(1, NAMESPACE);
                    ps.setString(2, key);
                    ps.setString(3, "{\"payment_id\": " + payment + "}");
                    ps.setLong(4, Long.parseLong(o[2]));
                    ps.execute();
                }
            } else {
                throw new IllegalStateException(key + ": " + o[0]);
            }
            c.commit();
            return payment;
        } catch (SQLException | RuntimeException e) {
            c.rollback();
            throw e;
        } finally {
            c.setAutoCommit(true);
        }
    }

    // In one transaction: SELECT 'client <who> asked for ' || <what>.
    static String inTransaction(Connection c, String who, String what) throws SQLException {
        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement("SELECT 'client " + who + " asked for ' || ?")) {
            ps.setString(1, what);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                String answer = rs.getString(1);
                c.commit();
                return answer;
            }
        } finally {
            c.setAutoCommit(true);
        }
    }

    interface Run { void run(Connection x) throws SQLException; }

    // Runs `run` six times on x on one server connection, then once on the
    // other one of the pool of two. Returns [what the last run threw or null,
    // the two backends].
    static Object[] moved(DataSource helpers, Connection x, Run run) throws SQLException {
        try (Connection y = helpers.getConnection(); Connection w = helpers.getConnection()) {
            y.setAutoCommit(false);
            w.setAutoCommit(false);
            try (Statement s = y.createStatement()) { s.execute("DEALLOCATE ALL"); }   // y holds one server connection
            try (Statement s = x.createStatement()) { s.execute("DEALLOCATE ALL"); }   // x runs on the other one
            for (int i = 0; i < 6; i++) run.run(x);
            long first = scalar(x, "SELECT pg_backend_pid()");
            scalar(w, "SELECT 1");                                                     // w holds that one now
            y.commit();
            SQLException error = null;
            try {
                run.run(x);
            } catch (SQLException e) {
                error = e;
            }
            long second = scalar(x, "SELECT pg_backend_pid()");
            w.commit();
            return new Object[] {error, first, second};
        }
    }

    public static void main(String[] args) throws Exception {
        String url = System.getenv("JDBC_URL");
        String serverUrl = url.replaceFirst(":\\d+/", ":" + System.getenv("SERVER_PORT") + "/");
        DataSource defaults = source(url);
        try (Connection s = source(serverUrl).getConnection()) {
            pay(s, "moved");
        }

        // The guide's setting.
        DataSource db = throughPgBouncer(url);
        try (Connection x = db.getConnection()) {
            Object[] m = moved(db, x, c -> begin(c, "moved"));
            ok(m[0] == null && !m[1].equals(m[2]),
               "prepareThreshold=0: the begin runs on another server connection after six runs on one", m[0]);
        }

        Map<String, List<Long>> payments = new ConcurrentHashMap<>();
        List<Exception> errors = new ArrayList<>();
        List<Thread> clients = new ArrayList<>();
        for (int n = 0; n < 8; n++) {
            int client = n;
            clients.add(new Thread(() -> {
                try (Connection c = db.getConnection()) {
                    for (int i = 0; i < 10; i++) {
                        String key = "load-" + client + "-" + i;
                        payments.put(key, List.of(pay(c, key), pay(c, key)));
                    }
                } catch (Exception e) {
                    synchronized (errors) { errors.add(e); }
                }
            }));
        }
        for (Thread t : clients) t.start();
        for (Thread t : clients) t.join();
        ok(errors.isEmpty(), "prepareThreshold=0: 8 connections pay 80 keys through the pool of two, with no error",
           errors.isEmpty() ? null : errors.get(0));
        ok(payments.size() == 80 && payments.values().stream().allMatch(p -> p.get(0).equals(p.get(1))),
           "one payment per key, replayed to its retry", payments.size());
        try (Connection s = source(serverUrl).getConnection()) {
            long n = scalar(s, "SELECT count(*) FROM payments");
            ok(n == 81, "the payments table holds those 80 (and the one before)", n);
        }

        // pgJDBC's defaults.
        try (Connection s = source(serverUrl).getConnection()) {
            s.setAutoCommit(false);
            scalar(s, "SELECT 1");
            s.commit();
            s.setAutoCommit(true);
            long named = scalar(s, "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'COMMIT'");
            ok(named == 1, "defaults: the first commit() leaves COMMIT prepared by name on its server connection", named);
        }
        try (Connection x = defaults.getConnection()) {
            Object[] m = moved(db, x, c -> inTransaction(c, "1", "a"));
            ok(m[0] == null, "defaults: a transaction whose statements are missing on its new server connection"
               + " fails at BEGIN, and pgJDBC prepares them again and retries", m[0]);
        }
        // Two clients' statements of one name: S_3 is each one's first statement after COMMIT and BEGIN.
        try (Connection y = db.getConnection(); Connection w = db.getConnection();
             Connection x1 = defaults.getConnection(); Connection x2 = defaults.getConnection()) {
            y.setAutoCommit(false);
            w.setAutoCommit(false);
            try (Statement s = y.createStatement()) { s.execute("DEALLOCATE ALL"); }
            try (Statement s = x1.createStatement()) { s.execute("DEALLOCATE ALL"); }
            for (int i = 0; i < 6; i++) inTransaction(x1, "1", "a");
            scalar(w, "SELECT 1");
            y.commit();
            try (Statement s = x2.createStatement()) { s.execute("DEALLOCATE ALL"); }
            for (int i = 0; i < 6; i++) inTransaction(x2, "2", "b");
            String answer = inTransaction(x1, "1", "a");
            w.commit();
            if (TRACKS_PREPARED) {
                ok(answer.equals("client 1 asked for a"),
                   "defaults, PgBouncer tracking prepared statements: each client runs its own S_3", answer);
            } else {
                ok(answer.equals("client 2 asked for a"),
                   "defaults, before PgBouncer 1.21: client 1's S_3 runs client 2's statement with client 1's parameter", answer);
            }
        }
        if (TRACKS_PREPARED) {
            try (Connection x = source(url + "&preparedStatementCacheQueries=1").getConnection()) {
                SQLException error = null;
                try {
                    for (int n = 0; n < 3; n++) {
                        for (int i = 0; i < 6; i++) {
                            try (PreparedStatement ps = x.prepareStatement("SELECT ?::int AS column_" + n)) {
                                ps.setInt(1, i);
                                ps.executeQuery().close();
                            }
                        }
                    }
                } catch (SQLException e) {
                    error = e;
                }
                ok(error == null, "defaults, PgBouncer tracking prepared statements: statements evicted from pgJDBC's cache are closed cleanly",
                   error);
            }
        }
        System.out.println("1.." + count);
        System.exit(failed == 0 ? 0 : 1);
    }
}
