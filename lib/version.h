/*
 * lib/version.h - what this build is: version, git describe, compiler.
 * Printed by --version and recorded in every run's provenance/.
 */
#ifndef STORK_VERSION_H
#define STORK_VERSION_H

/* "0.1.0" */
const char *stork_version(void);
/* git describe of the source tree at configure time, or "none". */
const char *stork_git_describe(void);
/* e.g. "gcc 12.2.0" */
const char *stork_compiler(void);

#endif
