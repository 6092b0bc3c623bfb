/*
 * lib/term_text.h - text from files shown on a terminal, its control
 * characters escaped.
 *
 * A run directory may be a colleague's, and what its files say (exit_info's
 * message, a host name, a directory's name) reaches whoever reads `stork
 * report --text`: raw, an ESC sequence could write to the reader's
 * clipboard (OSC 52), hide text or move the cursor. Every byte below 0x20
 * but newline and tab, DEL, and the C1 controls U+0080..U+009F (the UTF-8
 * pairs C2 80..C2 9F) are written as \xNN or \u00NN instead; the rest,
 * UTF-8 included, is written as it is.
 */
#ifndef STORK_LIB_TERM_TEXT_H
#define STORK_LIB_TERM_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Write the n bytes of s to f, escaped; 0, or EOF when f failed. */
int term_write(FILE *f, const char *s, size_t n);

/* printf to f, the result escaped as term_write does; 0, or EOF on failure. */
int term_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
