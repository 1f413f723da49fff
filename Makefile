# Makefile: builds, installs and tests the idempotency extension with PGXS.
#
#   make && sudo make install     the usual PGXS build (PG_CONFIG=... to pick a server)
#   make run                      README command 1: dependencies, build, install, private server, demo
#   make test                     README command 2: every test layer against a private server
#   make test SLOW=1              the same, with the long versions of the reliability tests (what CI runs)
#   make test LAYERS=regress,alone  only those layers (test/bin/run-tests names them)
#   make check-regress T=parse    one layer or one test against a private server (CONTRIBUTING.md)
#   make test PG=NN               pg_regress, isolation, pgTAP and Perl TAP against PostgreSQL NN (13, 15, 17, 18, 19),
#                                 then the portable edition through the plain script (LAYERS=native or portable: one)
#   make sanitize                 pg_regress, isolation and pgTAP against an ASan+UBSan build (own PostgreSQL copy)
#   make fuzz                     libFuzzer + ASan/UBSan targets for src/core/ (FUZZ_RUNS=N or FUZZ_SECONDS=N)
#   make unittest                 GoogleTest for src/core/ only (no server)
#   make installcheck             pg_regress + isolation against the server named by PG* variables

EXTENSION = idempotency
MODULE_big = idempotency
# The current release's install and update scripts are assembled from the
# SQL sources (src/sql, written once for both editions); earlier releases'
# scripts are kept as they shipped.
DATA_built = idempotency--1.0.0.sql idempotency--0.9.2--1.0.0.sql
DATA = $(filter-out $(DATA_built),$(wildcard idempotency--*.sql))

CORE_SRCS = $(wildcard src/core/*.cpp)
PG_SRCS = $(wildcard src/pg/*.cpp)
OBJS = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

PG_CONFIG ?= pg_config

# pg_regress: sql/NAME.sql against expected/NAME.out, in this order.
REGRESS = update namespace mint parse canonical store direct bound_store typed registry settings bad_input stats release extend_lease recovery batch fingerprint http parallel usage readme scope squat update_keys default_privileges tenant_stores metrics collation


# isolationtester: test/isolation/specs/NAME.spec against test/isolation/expected/NAME.out.
ISOLATION = mint_sessions store_concurrency store_purge purge_direct lease_takeover namespace_admin lock_tags bound_store first_look held_claims batch index_maintenance defaults_change stale_policy
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso --load-extension=idempotency

# C++17, every warning an error; PostgreSQL's headers as system headers so
# their own warnings stay theirs (-isystem wins over PGXS's later -I).
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)
# The release, from the control file: 18's module magic records it (src/pg/compat.hpp).
IDEM_VERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(EXTENSION).control)
PG_CPPFLAGS += -DIDEM_VERSION='"$(IDEM_VERSION)"'
# bench/decisions builds variants that undo a design decision (IDEM_MEASURE_*).
PG_CPPFLAGS += $(IDEM_MEASURE)
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror
SHLIB_LINK = -lcrypto -lstdc++

# No LLVM bitcode: JIT inlining of a C++ SPI caller buys nothing and would
# make clang a build dependency.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

SQL_SOURCES = $(wildcard src/sql/*.sql src/sql/update/*.sql) src/sql/assemble
idempotency--1.0.0.sql: src/sql/install.native $(SQL_SOURCES)
	bash src/sql/assemble $< 1.0.0 >$@
idempotency--0.9.2--1.0.0.sql: src/sql/update/0.9.2--1.0.0.native $(SQL_SOURCES)
	bash src/sql/assemble $< 1.0.0 0.9.2 >$@

# PGXS tracks no header dependencies: rebuild every object when a header changes.
$(OBJS): $(wildcard src/core/*.hpp src/pg/*.hpp)

# PGXS links with the C compiler; the C++ objects need -fPIC like the rest.
CXXFLAGS += $(CFLAGS_SL)

# ---- GoogleTest for the pure C++ core (no PostgreSQL) ----
UNIT_DIR = build/unit
UNIT_SRCS = $(wildcard test/unit/*.cpp)
UNIT_BIN = $(UNIT_DIR)/core_tests

$(UNIT_BIN): $(CORE_SRCS) $(UNIT_SRCS) $(wildcard src/core/*.hpp test/unit/*.hpp) test/kat/vectors.csv test/kat/keys.csv
	@mkdir -p $(UNIT_DIR)
	$(CXX) -std=c++17 -Wall -Wextra -Werror -g -O1 -Isrc -DIDEM_KAT_CSV='"$(CURDIR)/test/kat/vectors.csv"' -DIDEM_KEYS_CSV='"$(CURDIR)/test/kat/keys.csv"' $(CORE_SRCS) $(UNIT_SRCS) \
		-lgtest -lgtest_main -lpthread -lcrypto -o $@

.PHONY: unittest run test stop check-regress check-alone check-isolation check-pgtap check-perl check-citus check-unit check-server check-stop bench fuzz sanitize dist dist-archive
unittest: $(UNIT_BIN)
	$(UNIT_BIN) $(if $(UNIT_FILTER),--gtest_filter='$(UNIT_FILTER)')

run:
	test/bin/run-demo

stop:
	test/bin/run-demo --stop

test:
	PGVER=$(PG) SLOW=$(SLOW) LAYERS=$(LAYERS) test/bin/run-tests

# make check-regress T=parse (check-alone, check-isolation, check-pgtap,
# check-perl, check-citus, check-unit): one layer, or the tests named in T,
# against a private server that keeps running (test/bin/check; make
# check-stop stops it). CONTRIBUTING.md says how long each takes.
check-regress check-alone check-isolation check-pgtap check-perl check-citus check-unit check-server check-stop:
	test/bin/check $(@:check-%=%) $(T)

# make fuzz [FUZZ_RUNS=N | FUZZ_SECONDS=N]: test/fuzz/run (needs clang and libclang-rt-14-dev).
fuzz:
	test/fuzz/run

sanitize:
	test/bin/sanitize

# make bench [ARGS=--quick]: the benchmark against the other contenders (bench/).
bench:
	bench/run $(ARGS)

EXTRA_CLEAN = $(EXTENSION)-*.zip build output_iso results regression.diffs regression.out tmp_check bench/results/chart.dat

# make dist: the PGXN release archive that META.json describes,
# NAME-VERSION.zip holding one folder of that name, made from the committed
# tree (git archive; .gitattributes leaves out CI and packaging), then
# validated by test/bin/check-dist. DIST_DIR=dir writes it elsewhere.
DIST_DIR ?= .
DIST_ZIP = $(DIST_DIR)/$(EXTENSION)-$(IDEM_VERSION).zip
dist: dist-archive
	test/bin/check-dist $(DIST_ZIP)

dist-archive:
	git -C $(CURDIR) archive --format=zip --prefix=$(EXTENSION)-$(IDEM_VERSION)/ -o $(abspath $(DIST_ZIP)) HEAD
	@echo $(abspath $(DIST_ZIP))
