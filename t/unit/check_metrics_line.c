/*
 * t/unit/check_metrics_line.c - metrics_line_scalar against jansson: on
 * every line the scanner answers, it answers what parsing the line with
 * jansson answers (the TensorBoard follower's rule for a scalar), for
 * storkd's own lines, lines made to sit on the grammar's edges, and
 * random mutations of both; and it answers storkd's lines itself.
 */
#include "config.h"
#include "lib/rng.h"
#include "lib/run/metrics_line.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* The oracle: 1 and *s when jansson finds a scalar (a string metric, an integer step, a numeric value). */
static int parsed(const char *line, size_t len, struct metrics_scalar *s)
{
	json_t *v = json_loadb(line, len, 0, NULL);
	const json_t *value = json_object_get(v, "value"), *step = json_object_get(v, "step");
	const char *metric = json_string_value(json_object_get(v, "metric"));
	int found = metric && json_is_number(value) && json_is_integer(step);

	*s = (struct metrics_scalar){ 0 };
	if (found) {
		s->ts = json_number_value(json_object_get(v, "ts"));
		s->step = json_integer_value(step);
		s->value = json_number_value(value);
		snprintf(s->metric, sizeof s->metric, "%s", metric);
	}
	json_decref(v);
	return found;
}

/* The scanner's answer on line (len bytes), checked against the oracle when it gives one. */
static int scanned(const char *line, size_t len)
{
	struct metrics_scalar a, b;
	int got = metrics_line_scalar(line, len, &a), want;

	if (got < 0)
		return got;
	want = parsed(line, len, &b);
	ck_assert_msg(got == want, "'%.*s': the scanner says %d, jansson %d", (int)len, line, got, want);
	if (got) {
		ck_assert_msg(!strcmp(a.metric, b.metric), "'%.*s': metric '%s' vs '%s'", (int)len, line,
			      a.metric, b.metric);
		ck_assert_msg(a.step == b.step && a.ts == b.ts && a.value == b.value,
			      "'%.*s': step %lld ts %.17g value %.17g vs %lld %.17g %.17g", (int)len, line,
			      a.step, a.ts, a.value, b.step, b.ts, b.value);
	}
	return got;
}

static const char *const storkd_lines[] = {
	"{\"ts\":1795968450.0920529,\"job_id\":\"local\",\"rank\":0,\"host\":\"vm\",\"step\":1,"
	"\"metric\":\"train_loss\",\"value\":5.5434732437133789,\"unit\":\"nats\",\"requeue\":0,\"attempt\":0}",
	"{\"ts\":1795968450.092097,\"job_id\":\"1234\",\"rank\":3,\"host\":\"n2\",\"step\":700,"
	"\"metric\":\"lr\",\"value\":0.00050000002374872565,\"unit\":\"\",\"requeue\":2,\"attempt\":1}",
	"{\"ts\":1795968450.1,\"job_id\":\"7\",\"rank\":0,\"host\":\"n1\",\"step\":12,\"metric\":\"gpu_throttle\","
	"\"value\":4,\"unit\":\"bits\",\"requeue\":0,\"attempt\":0,\"reasons\":\"sw_power_cap, hw_slowdown\"}",
	"{\"ts\":1.5e9,\"step\":0,\"metric\":\"mfu\",\"value\":-1.25E-3}",
	"{ \"metric\" : \"x\" , \"step\" : -3 , \"value\" : 0 }",
};

/* Lines on the edges of what the scanner reads; each either answered right or left to jansson. */
static const char *const edge_lines[] = {
	"{}", " {} ", "{\"step\":1,\"value\":2}", "{\"metric\":\"a\",\"step\":1.0,\"value\":2}",
	"{\"metric\":\"a\",\"step\":1e2,\"value\":2}", "{\"metric\":\"a\",\"step\":1,\"value\":\"2\"}",
	"{\"metric\":\"a\",\"step\":1,\"value\":true}", "{\"metric\":\"a\",\"step\":1,\"value\":null}",
	"{\"metric\":1,\"step\":1,\"value\":2}", "{\"metric\":\"a\",\"step\":1,\"value\":2,\"ts\":\"now\"}",
	"{\"metric\":\"a\\\"b\",\"step\":1,\"value\":2}", "{\"metric\":\"a\",\"step\":1,\"value\":2,\"u\":\"\\u00e9\"}",
	"{\"metric\":\"a\",\"step\":1,\"value\":2,\"u\":\"\\n\\t\\\\\"}", "{\"metric\":\"a\",\"step\":1,\"value\":2}x",
	"{\"metric\":\"a\",\"step\":1,\"value\":2,}", "{\"metric\":\"a\",\"step\":01,\"value\":2}",
	"{\"metric\":\"a\",\"step\":1,\"value\":.5}", "{\"metric\":\"a\",\"step\":1,\"value\":1.}",
	"{\"metric\":\"a\",\"step\":1,\"value\":+1}", "{\"metric\":\"a\",\"step\":1,\"value\":-}",
	"{\"metric\":\"a\",\"step\":1,\"value\":1e}", "{\"metric\":\"a\",\"step\":1,\"value\":1e400}",
	"{\"metric\":\"a\",\"step\":1,\"value\":1e-400}", "{\"metric\":\"a\",\"step\":99999999999999999999,\"value\":2}",
	"{\"metric\":\"a\",\"step\":9223372036854775807,\"value\":2}", "{\"metric\":\"a\",\"metric\":\"b\",\"step\":1,\"value\":2}",
	"{\"metric\":\"a\",\"step\":1,\"value\":[2]}", "{\"metric\":\"a\",\"step\":1,\"value\":2,\"o\":{\"x\":1}}",
	"[1,2]", "", "   ", "{\"metric\":\"a\",\"step\":1,\"value\":NaN}", "{\"metric\":\"a\",\"step\":1,\"value\":2",
	"{\"metric\":\"a\" \"step\":1,\"value\":2}", "{\"metric\":\"a\",\"step\":1,\"value\":2}\n",
	"{\"metric\":\"a\",\"step\":1,\"value\":tru}", "{\"metric\":\"a\",\"step\":1,\"value\":2,\"s\":\"\t\"}",
	"{\"metric\":\"\",\"step\":1,\"value\":2}", "{\"metric\":\"a\",\"step\":-0,\"value\":-0.0}",
};

#define NSTORKD (sizeof storkd_lines / sizeof storkd_lines[0])
#define NEDGE (sizeof edge_lines / sizeof edge_lines[0])

START_TEST(storkd_lines_are_read_without_jansson)
{
	for (size_t i = 0; i < NSTORKD; i++)
		ck_assert_msg(scanned(storkd_lines[i], strlen(storkd_lines[i])) == 1, "%s",
			      storkd_lines[i]);
}
END_TEST

START_TEST(a_line_on_an_edge_is_answered_right_or_left_to_jansson)
{
	int answered = 0;

	for (size_t i = 0; i < NEDGE; i++)
		answered += scanned(edge_lines[i], strlen(edge_lines[i])) >= 0;
	/* most of them are answered here: the oracle saw the scanner decide */
	ck_assert_int_ge(answered, 15);
	/* a name the scanner would have to unescape is left to jansson */
	ck_assert_int_eq(scanned(edge_lines[10], strlen(edge_lines[10])), -1);
}
END_TEST

/* Random edits of storkd's lines with JSON's own characters: any answer given is jansson's. */
START_TEST(mutated_lines_agree_with_jansson)
{
	static const char alphabet[] = "{}[]\":,.-+eE0123456789 \\tfnul\"ax\t\x01\xc3";
	uint64_t rng = 42;
	char line[512];
	int answered = 0, scalars = 0;

	for (int k = 0; k < 200000; k++) {
		const char *seed = k % 2 ? storkd_lines[k / 2 % NSTORKD] : edge_lines[k / 2 % NEDGE];
		size_t len = strlen(seed);
		int edits = 1 + (int)rng_below(&rng, 3), got;

		memcpy(line, seed, len);
		for (int e = 0; e < edits && len > 0; e++) {
			size_t at = rng_below(&rng, (uint32_t)len);
			char ch = alphabet[rng_below(&rng, sizeof alphabet - 1)];

			switch (rng_below(&rng, 3)) {
			case 0: line[at] = ch; break;
			case 1: memmove(line + at, line + at + 1, len - at - 1), len--; break;
			default: memmove(line + at + 1, line + at, len - at), line[at] = ch, len++; break;
			}
		}
		got = scanned(line, len);
		answered += got >= 0;
		scalars += got == 1;
	}
	/* the scanner decided a fair share itself, scalars among them */
	ck_assert_int_gt(answered, 40000);
	ck_assert_int_gt(scalars, 10000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics_line");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, storkd_lines_are_read_without_jansson);
	tcase_add_test(tc, a_line_on_an_edge_is_answered_right_or_left_to_jansson);
	tcase_add_test(tc, mutated_lines_agree_with_jansson);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
