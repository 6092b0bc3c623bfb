# Tests: Check unit tests (t/unit) and integration tests on a real Slurm
# cluster (t/integration), all run by `make check`.

# Flags every Check unit test uses; each area's fragment lists its programs:
#   check_PROGRAMS += t/unit/check_foo
#   TESTS += t/unit/check_foo
#   t_unit_check_foo_SOURCES = t/unit/check_foo.c
#   t_unit_check_foo_CFLAGS = $(UNIT_CFLAGS)
#   t_unit_check_foo_LDADD = $(UNIT_LIBS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -DSTORK_TEST_DATA='"$(abs_top_srcdir)/t/data"'
UNIT_LIBS = lib/libstork.la $(CHECK_LIBS)

include t/unit/bind.mk
include t/unit/config.mk
include t/unit/comm.mk
include t/unit/engine.mk
