/*
 * launcher/programs.h - Stork's other programs, as stork finds and starts
 * them: storkd, the daemon `stork run` supervises, storkd-program, the one
 * of `stork run -- PROGRAM`, and stork-engine, which runs the subcommands
 * that need the training engine.
 *
 * In the build tree they are beside stork (../daemon/storkd,
 * engine/stork-engine); installed, in sbindir and pkglibexecdir.
 * STORK_STORKD and STORK_ENGINE name them explicitly (stork(1)).
 */
#ifndef STORK_LAUNCHER_PROGRAMS_H
#define STORK_LAUNCHER_PROGRAMS_H

#include <stddef.h>

/* The storkd to start: given (--storkd) when not NULL, else as above. */
void find_storkd(const char *given, char *buf, size_t len);

/* The daemon of `stork run -- PROGRAM`, storkd-program: in the build tree
 * ../daemon/storkd-program, installed in pkglibexecdir; STORK_STORKD_PROGRAM
 * names it explicitly. */
void find_program_daemon(char *buf, size_t len);

/*
 * Execute stork-engine with this subcommand and its arguments (argv[0] is
 * "check", "export" or "bench"), so that it runs exactly as `stork ARGV...`
 * would. Returns only when it could not: an exit code, with a message.
 */
int engine_exec(int argc, char **argv);

#endif
