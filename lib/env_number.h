/*
 * lib/env_number.h - integers from the environment, parsed strictly.
 *
 * Slurm and the test suite pass numbers in variables (SLURM_PROCID,
 * SLURM_RESTART_COUNT, STORK_STOP_AT_STEP...). atoi() would turn "1x" or
 * "" into a number and a typo into 0, silently; here a malformed value is
 * an error that names the variable and its value.
 */
#ifndef STORK_LIB_ENV_NUMBER_H
#define STORK_LIB_ENV_NUMBER_H

#include <stddef.h>

/*
 * The integer in variable name, within [min, max]: *out = dflt and 0 when
 * the variable is unset or empty; 0 when it parses; -1 with
 * "NAME=VALUE: not an integer from MIN to MAX" in err otherwise.
 */
int env_number(const char *name, long long min, long long max, long long dflt, long long *out,
	       char *err, size_t errlen);

/*
 * setenv(name, value) for this process's own sake (a library's tuning,
 * say), noting name in STORKD_SET_ENV ("A:B") so that the environment
 * handed on to a user's program can leave it out (daemon/program/program_env.c).
 */
void env_set_own(const char *name, const char *value);

/* The name of the variable env_set_own notes its names in. */
#define ENV_SET_OWN_LIST "STORKD_SET_ENV"

#endif
