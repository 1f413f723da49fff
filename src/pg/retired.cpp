// retired.cpp: the C symbols that only schemas older than 0.9.0 name. The
// update scripts from those releases still create functions with them on
// the way to 1.0.0 (CREATE FUNCTION checks that the symbol exists), and the
// next script replaces each. A call answers 55000 with the update to run:
// this library serves a 0.9 or 1.0 schema only (docs/compatibility.md).
#include "postgres.hpp"

#include "extension.hpp"
#include "guard.hpp"


IDEM_FUNCTION(idem_begin) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_begin_0_5) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_begin_0_6) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_begin_0_8) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_begin_batch) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_commit) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_fail_permanent) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_fail_transient) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_fail_transient_0_5) { (void)fcinfo; idem::pg::schema_too_old(); }
IDEM_FUNCTION(idem_store_stats) { (void)fcinfo; idem::pg::schema_too_old(); }
