/*
 * lib/bounded.h - text into fixed buffers without silent truncation.
 *
 * A path cut short names another file (or, in a command, another
 * directory): path_join refuses instead. A message cut short is still a
 * message, but it must say so: msg_format ends it with "..." when it did
 * not fit. Code that writes into fixed buffers uses one or the other, and
 * the build keeps GCC's -Wformat-truncation on to find the rest.
 */
#ifndef STORK_LIB_BOUNDED_H
#define STORK_LIB_BOUNDED_H

#include <stddef.h>

/* dir "/" name into dst (len bytes): 0, or -1 with errno = ENAMETOOLONG. */
int path_join(char *dst, size_t len, const char *dir, const char *name);

/* printf into dst (len bytes); a message that does not fit ends in "...". */
void msg_format(char *dst, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* msg_format into dst (NULL or len 0: nothing), then return code: the
 * "say why and give the exit code" of a function that fails. */
int msg_fail(char *dst, size_t len, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
