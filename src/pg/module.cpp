// module.cpp: the library's identity for PostgreSQL's loader.
#include "postgres.hpp"

extern "C" {
PG_MODULE_MAGIC;
}
