// postgres.hpp: the one place glue code includes PostgreSQL's C headers.
//
// Only files under src/pg/ may include this; src/core/ never sees PostgreSQL.
// The Makefile passes the server include directory with -isystem, so warnings
// inside PostgreSQL's headers do not trip -Werror in our C++.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "catalog/pg_type.h"
}
