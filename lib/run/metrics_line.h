/*
 * lib/run/metrics_line.h - one metrics line's scalar (its "ts", "step",
 * "metric" and "value") read without a JSON parser.
 *
 * The TensorBoard follower reads every line every rank writes: ten or more
 * a step, each a flat object of a dozen members. Parsing each into a
 * jansson tree cost more than everything else it does with the line. The
 * scanner here reads the flat objects storkd writes and answers "I cannot
 * tell" for anything else (a nested value, an escape where it matters, a
 * number JSON would not accept, text past the object), so the caller
 * parses those with jansson and both give the same answer.
 */
#ifndef STORK_METRICS_LINE_H
#define STORK_METRICS_LINE_H

#include <stddef.h>

struct metrics_scalar {
	double ts;       /* the line's "ts"; 0 when it has none (jansson's json_number_value of nothing) */
	long long step;
	double value;
	char metric[128];
};

/*
 * line (len bytes, no newline) as a scalar: 1 and *s when it is an object
 * whose "metric" is a string, "step" an integer and "value" a number; 0
 * when it is a flat object that is not such a line; -1 when the scanner
 * cannot tell (parse the line instead).
 */
int metrics_line_scalar(const char *line, size_t len, struct metrics_scalar *s);

#endif
