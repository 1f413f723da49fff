// Command exporter serves the metrics of sql_exporter collector files
// (monitoring/sql_exporter/) for test/monitoring/run: a stand-in for
// sql_exporter (github.com/burningalchemist/sql_exporter), whose module the
// Go module proxy reachable here does not serve. It reads the subset of the
// configuration format that monitoring/ uses (collector_files, the target's
// data_source_name and collectors, min_interval; per collector queries,
// query_ref, metrics with key_labels, value_label and values) and keeps
// sql_exporter's rules where they decide what a collector file means:
// unknown fields, a missing name, type or help, values without a
// value_label, a label in both key_labels and value_label, a column used
// both as a key and as a value, or a column a query does not return are
// errors; a NULL value renders no sample and a NULL key an empty label;
// results are kept for min_interval. Every sample is checked by
// client_golang's registry (a metric collected twice with the same labels
// fails the scrape), as sql_exporter's is.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"
)

// config is the exporter's configuration file (sql_exporter.yml).
type config struct {
	Global struct {
		MinInterval        string `yaml:"min_interval"`
		ScrapeTimeoutOff   string `yaml:"scrape_timeout_offset"`
		MaxConnections     int    `yaml:"max_connections"`
		MaxIdleConnections int    `yaml:"max_idle_connections"`
	} `yaml:"global"`
	Target struct {
		Name           string   `yaml:"name"`
		DataSourceName string   `yaml:"data_source_name"`
		Collectors     []string `yaml:"collectors"`
	} `yaml:"target"`
	CollectorFiles []string `yaml:"collector_files"`
}

// collectorConfig is one collector file.
type collectorConfig struct {
	Name        string          `yaml:"collector_name"`
	MinInterval string          `yaml:"min_interval"`
	Queries     []*queryConfig  `yaml:"queries"`
	Metrics     []*metricConfig `yaml:"metrics"`
}

type queryConfig struct {
	Name  string `yaml:"query_name"`
	Query string `yaml:"query"`
}

type metricConfig struct {
	Name       string   `yaml:"metric_name"`
	Type       string   `yaml:"type"`
	Help       string   `yaml:"help"`
	KeyLabels  []string `yaml:"key_labels"`
	ValueLabel string   `yaml:"value_label"`
	Values     []string `yaml:"values"`
	Query      string   `yaml:"query"`
	QueryRef   string   `yaml:"query_ref"`
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// decodeStrict parses YAML into out, refusing fields out does not have.
func decodeStrict(data []byte, out any) error {
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	return d.Decode(out)
}

// validate applies sql_exporter's checks of a metric definition.
func (m *metricConfig) validate() error {
	switch {
	case m.Name == "":
		return errors.New("missing name for metric")
	case m.Type != "counter" && m.Type != "gauge":
		return fmt.Errorf("unsupported metric type %q for metric %q", m.Type, m.Name)
	case m.Help == "":
		return fmt.Errorf("missing help for metric %q", m.Name)
	case (m.Query == "") == (m.QueryRef == ""):
		return fmt.Errorf("exactly one of query and query_ref must be specified for metric %q", m.Name)
	case len(m.Values) == 0:
		return fmt.Errorf("no values defined for metric %q", m.Name)
	case len(m.Values) > 1 && m.ValueLabel == "":
		return fmt.Errorf("value_label must be defined for metric with multiple values %q", m.Name)
	}
	for i, l := range m.KeyLabels {
		if !labelName.MatchString(l) {
			return fmt.Errorf("invalid key label %q for metric %q", l, m.Name)
		}
		if slices.Contains(m.KeyLabels[i+1:], l) || l == m.ValueLabel {
			return fmt.Errorf("duplicate label %q for metric %q", l, m.Name)
		}
	}
	if m.ValueLabel != "" && !labelName.MatchString(m.ValueLabel) {
		return fmt.Errorf("invalid value_label %q for metric %q", m.ValueLabel, m.Name)
	}
	return nil
}

// query is one SQL query and the metrics it feeds.
type query struct {
	sql     string
	metrics []*metricConfig
	columns map[string]bool // true: a key column, false: a value column
}

// collector runs a collector's queries, keeping the samples for minInterval.
type collector struct {
	name        string
	db          *sql.DB
	queries     []*query
	minInterval time.Duration
	mu          sync.Mutex
	at          time.Time
	cached      []prometheus.Metric
	err         error
}

func newCollector(c *collectorConfig, db *sql.DB, fallback time.Duration) (*collector, error) {
	interval := fallback
	if c.MinInterval != "" {
		d, err := time.ParseDuration(c.MinInterval)
		if err != nil {
			return nil, fmt.Errorf("collector %q: min_interval: %w", c.Name, err)
		}
		interval = d
	}
	byName := map[string]*query{}
	col := &collector{name: c.Name, db: db, minInterval: interval}
	for _, q := range c.Queries {
		if q.Name == "" || q.Query == "" {
			return nil, fmt.Errorf("collector %q: a query needs query_name and query", c.Name)
		}
		byName[q.Name] = &query{sql: q.Query, columns: map[string]bool{}}
		col.queries = append(col.queries, byName[q.Name])
	}
	if len(c.Metrics) == 0 {
		return nil, fmt.Errorf("no metrics defined for collector %q", c.Name)
	}
	for _, m := range c.Metrics {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("collector %q: %w", c.Name, err)
		}
		q := byName[m.QueryRef]
		if m.QueryRef == "" {
			q = &query{sql: m.Query, columns: map[string]bool{}}
			col.queries = append(col.queries, q)
		} else if q == nil {
			return nil, fmt.Errorf("unresolved query_ref %q in metric %q of collector %q", m.QueryRef, m.Name, c.Name)
		}
		for _, k := range m.KeyLabels {
			if isKey, seen := q.columns[k]; seen && !isKey {
				return nil, fmt.Errorf("column %q used both as key and value", k)
			}
			q.columns[k] = true
		}
		for _, v := range m.Values {
			if isKey, seen := q.columns[v]; seen && isKey {
				return nil, fmt.Errorf("column %q used both as key and value", v)
			}
			q.columns[v] = false
		}
		q.metrics = append(q.metrics, m)
	}
	return col, nil
}

func (c *collector) Describe(chan<- *prometheus.Desc) {} // unchecked: the samples are known only from the rows

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached == nil || time.Since(c.at) >= c.minInterval {
		c.cached, c.err = c.run()
		c.at = time.Now()
	}
	if c.err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("idempotency_exporter_error", "error", nil, nil), c.err)
		return
	}
	for _, m := range c.cached {
		ch <- m
	}
}

// run executes every query once and turns its rows into samples.
func (c *collector) run() ([]prometheus.Metric, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []prometheus.Metric
	for _, q := range c.queries {
		rows, err := c.db.QueryContext(ctx, q.sql)
		if err != nil {
			return nil, fmt.Errorf("collector %q: %w", c.name, err)
		}
		names, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		have := 0
		dest := make([]any, len(names))
		for i, n := range names {
			isKey, used := q.columns[n]
			switch {
			case !used:
				dest[i] = new(any) // an extra column, as sql_exporter logs and ignores
			case isKey:
				dest[i], have = new(sql.NullString), have+1
			default:
				dest[i], have = new(sql.NullFloat64), have+1
			}
		}
		if have != len(q.columns) {
			rows.Close()
			return nil, fmt.Errorf("collector %q: missing values for the requested columns (query returns %v)", c.name, names)
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("collector %q: %w", c.name, err)
			}
			row := map[string]any{}
			for i, n := range names {
				row[n] = dest[i]
			}
			for _, m := range q.metrics {
				out = append(out, samples(m, row)...)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// samples: metric m's samples of one row (none for a NULL value).
func samples(m *metricConfig, row map[string]any) []prometheus.Metric {
	labels := slices.Clone(m.KeyLabels)
	values := make([]string, 0, len(labels)+1)
	for _, k := range m.KeyLabels {
		values = append(values, row[k].(*sql.NullString).String)
	}
	if m.ValueLabel != "" {
		labels = append(labels, m.ValueLabel)
		values = append(values, "")
	}
	kind := prometheus.GaugeValue
	if m.Type == "counter" {
		kind = prometheus.CounterValue
	}
	desc := prometheus.NewDesc(m.Name, m.Help, labels, nil)
	var out []prometheus.Metric
	for _, v := range m.Values {
		f := row[v].(*sql.NullFloat64)
		if !f.Valid {
			continue
		}
		if m.ValueLabel != "" {
			values[len(values)-1] = v
		}
		out = append(out, prometheus.MustNewConstMetric(desc, kind, f.Float64, values...))
	}
	return out
}

// load reads the configuration and the collector files it names.
func load(path string) (*config, []*collectorConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var cfg config
	if err := decodeStrict(data, &cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var collectors []*collectorConfig
	for _, pattern := range cfg.CollectorFiles {
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(filepath.Dir(path), pattern)
		}
		files, err := filepath.Glob(pattern)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, nil, err
			}
			var c collectorConfig
			if err := decodeStrict(data, &c); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			collectors = append(collectors, &c)
		}
	}
	return &cfg, collectors, nil
}

func main() {
	configFile := flag.String("config.file", "sql_exporter.yml", "the configuration file")
	listen := flag.String("web.listen-address", "127.0.0.1:9399", "address to serve /metrics on")
	check := flag.Bool("config.check", false, "check the configuration and exit")
	flag.Parse()
	cfg, collectors, err := load(*configFile)
	if err != nil {
		log.Fatal(err)
	}
	var fallback time.Duration
	if cfg.Global.MinInterval != "" {
		if fallback, err = time.ParseDuration(cfg.Global.MinInterval); err != nil {
			log.Fatalf("global min_interval: %v", err)
		}
	}
	db, err := sql.Open("postgres", cfg.Target.DataSourceName)
	if err != nil {
		log.Fatal(err)
	}
	if cfg.Global.MaxConnections > 0 {
		db.SetMaxOpenConns(cfg.Global.MaxConnections)
	}
	registry := prometheus.NewRegistry()
	wanted := 0
	for _, c := range collectors {
		matched := false
		for _, pattern := range cfg.Target.Collectors {
			if ok, _ := filepath.Match(pattern, c.Name); ok {
				matched = true
			}
		}
		if !matched {
			continue
		}
		col, err := newCollector(c, db, fallback)
		if err != nil {
			log.Fatal(err)
		}
		registry.MustRegister(col)
		wanted++
	}
	if wanted == 0 {
		log.Fatalf("no collector of %v is defined in %v", cfg.Target.Collectors, cfg.CollectorFiles)
	}
	if *check {
		fmt.Printf("configuration OK: %d collector(s)\n", wanted)
		return
	}
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	server := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		_ = server.Shutdown(context.Background())
	}()
	log.Printf("serving %d collector(s) on http://%s/metrics", wanted, *listen)
	if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
