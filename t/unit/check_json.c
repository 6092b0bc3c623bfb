/*
 * t/unit/check_json.c - the promises of lib/json: the writer produces
 * exactly the expected JSON text (escaping, numbers, nesting, commas,
 * indentation), misuse is reported instead of producing bad JSON, and the
 * reader gives back what the writer wrote.
 *
 * Expected texts are written out by hand from RFC 8259's grammar.
 */
#include "config.h"
#include "lib/json.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512];

/* The compact text of one string value. */
static void assert_string_json(const char *in, size_t len, const char *want)
{
	struct json j;

	json_init(&j, JSON_COMPACT);
	json_string_len(&j, in, len);
	ck_assert_int_eq(json_error(&j), 0);
	ck_assert_str_eq(json_str(&j), want);
	json_free(&j);
}

START_TEST(strings_are_escaped)
{
	assert_string_json("plain", 5, "\"plain\"");
	assert_string_json("q\"b\\s/", 6, "\"q\\\"b\\\\s/\"");
	assert_string_json("\n\t\r\b\f", 5, "\"\\n\\t\\r\\b\\f\"");
	assert_string_json("\x01\x1f", 2, "\"\\u0001\\u001f\"");
	assert_string_json("a\0b", 3, "\"a\\u0000b\"");
	assert_string_json("", 0, "\"\"");
}
END_TEST

START_TEST(valid_utf8_passes_through)
{
	/* é (2 bytes), € (3 bytes), 𝄞 (4 bytes). */
	assert_string_json("\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\"");
}
END_TEST

START_TEST(invalid_utf8_becomes_replacement_character)
{
	/* A lone continuation byte, a truncated sequence, an overlong '/',
	 * and an encoded surrogate (U+D800). */
	assert_string_json("a\x80" "b", 3, "\"a\\ufffdb\"");
	assert_string_json("\xe2\x82", 2, "\"\\ufffd\\ufffd\"");
	assert_string_json("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");
	assert_string_json("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");
}
END_TEST

START_TEST(numbers_are_exact)
{
	struct json j;

	json_init(&j, JSON_COMPACT);
	json_begin_array(&j);
	json_int(&j, INT64_MIN);
	json_int(&j, 0);
	json_uint(&j, UINT64_MAX);
	json_double(&j, 0.1);
	json_double(&j, 1.5);
	json_double(&j, -2.0);
	json_double(&j, 1e-300);
	json_double(&j, 6.02214076e23);
	json_double(&j, NAN);
	json_double(&j, INFINITY);
	json_double(&j, -INFINITY);
	json_end_array(&j);
	ck_assert_int_eq(json_error(&j), 0);
	ck_assert_str_eq(json_str(&j),
			 "[-9223372036854775808,0,18446744073709551615,0.1,1.5,-2,1e-300,"
			 "6.02214076e+23,null,null,null]");
	json_free(&j);
}
END_TEST

START_TEST(doubles_round_trip)
{
	/* Values whose shortest form needs all 17 digits, and neighbours. */
	const double v[] = { 0.1 + 0.2, 1.0 / 3.0, nextafter(1.0, 2.0), 5e-324, 1.7976931348623157e308,
			     -0.0, 123456789.123456789 };
	struct json j;

	json_init(&j, JSON_COMPACT);
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		struct json_value *r;

		json_reset(&j);
		json_double(&j, v[i]);
		r = json_parse(json_str(&j), json_len(&j), err, sizeof err);
		ck_assert_msg(r, "%s", err);
		ck_assert_int_eq(r->type, JSON_NUMBER);
		ck_assert_msg(memcmp(&r->num, &v[i], sizeof(double)) == 0, "%s read back as %.17g",
			      json_str(&j), r->num);
		json_value_free(r);
	}
	json_free(&j);
}
END_TEST

START_TEST(nesting_and_commas_compact)
{
	struct json j;

	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_key_string(&j, "reason", "completed");
	json_key_int(&j, "exit_code", 0);
	json_key_begin_object(&j, "first_failure");
	json_end_object(&j);
	json_key_begin_array(&j, "ranks");
	json_int(&j, 1);
	json_begin_object(&j);
	json_key_bool(&j, "ok", true);
	json_key_null(&j, "why");
	json_end_object(&j);
	json_begin_array(&j);
	json_end_array(&j);
	json_end_array(&j);
	json_key_double(&j, "t", 0.5);
	json_key_string(&j, "none", NULL);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), 0);
	ck_assert_str_eq(json_str(&j),
			 "{\"reason\":\"completed\",\"exit_code\":0,\"first_failure\":{},"
			 "\"ranks\":[1,{\"ok\":true,\"why\":null},[]],\"t\":0.5,\"none\":null}");
	json_free(&j);
}
END_TEST

START_TEST(pretty_style_indents_two_spaces)
{
	struct json j;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_string(&j, "a", "x");
	json_key_begin_array(&j, "b");
	json_int(&j, 1);
	json_int(&j, 2);
	json_end_array(&j);
	json_key_begin_object(&j, "c");
	json_end_object(&j);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), 0);
	ck_assert_str_eq(json_str(&j), "{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {}\n}");
	json_free(&j);
}
END_TEST

START_TEST(misuse_is_reported)
{
	struct json j;

	/* A value where a key is due. */
	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_int(&j, 1);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_free(&j);

	/* A key in an array. */
	json_init(&j, JSON_COMPACT);
	json_begin_array(&j);
	json_key(&j, "k");
	json_end_array(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_free(&j);

	/* Unbalanced: an object left open, an array closed as an object. */
	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_reset(&j);
	json_begin_array(&j);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_free(&j);

	/* A key without its value; two top-level values; nothing at all. */
	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_key(&j, "k");
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_reset(&j);
	json_int(&j, 1);
	json_int(&j, 2);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_reset(&j);
	ck_assert_int_eq(json_error(&j), EINVAL);
	json_free(&j);
}
END_TEST

START_TEST(reset_starts_a_new_jsonl_line)
{
	struct json j;

	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_key_int(&j, "step", 1);
	json_end_object(&j);
	ck_assert_str_eq(json_str(&j), "{\"step\":1}");
	json_reset(&j);
	json_begin_object(&j);
	json_key_int(&j, "step", 2);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), 0);
	ck_assert_str_eq(json_str(&j), "{\"step\":2}");
	json_free(&j);
}
END_TEST

START_TEST(reader_reads_what_the_writer_wrote)
{
	const char nasty[] = "tab\there \"quoted\" back\\slash \x01 é 𝄞 \xff end";
	struct json j;
	struct json_value *v;
	const struct json_value *ff, *ranks;
	int64_t i;
	double d;
	bool b;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_string(&j, "reason", "rank_failed");
	json_key_int(&j, "exit_code", 20);
	json_key_int(&j, "big", INT64_MAX);
	json_key_double(&j, "loss", 5.4123);
	json_key_double(&j, "nan", NAN);
	json_key_bool(&j, "requeued", false);
	json_key_string(&j, "message", nasty);
	json_key_begin_object(&j, "first_failure");
	json_key_string(&j, "host", "n2");
	json_key_int(&j, "rank", 3);
	json_end_object(&j);
	json_key_begin_array(&j, "ranks");
	json_int(&j, 7);
	json_string(&j, "x");
	json_end_array(&j);
	json_end_object(&j);
	ck_assert_int_eq(json_error(&j), 0);

	v = json_parse(json_str(&j), json_len(&j), err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_str_eq(json_get_string(v, "reason"), "rank_failed");
	ck_assert_int_eq(json_get_int(v, "exit_code", &i), 0);
	ck_assert_int_eq(i, 20);
	ck_assert_int_eq(json_get_int(v, "big", &i), 0);
	ck_assert(i == INT64_MAX);
	ck_assert_int_eq(json_get_double(v, "loss", &d), 0);
	ck_assert(d == 5.4123);
	ck_assert_int_eq(json_get_double(v, "nan", &d), -1);
	ck_assert_int_eq(json_get(v, "nan")->type, JSON_NULL);
	ck_assert_int_eq(json_get_bool(v, "requeued", &b), 0);
	ck_assert(!b);
	/* Everything but the invalid byte 0xff comes back as it was. */
	ck_assert_str_eq(json_get_string(v, "message"),
			 "tab\there \"quoted\" back\\slash \x01 é 𝄞 \xef\xbf\xbd end");
	ff = json_get(v, "first_failure");
	ck_assert_str_eq(json_get_string(ff, "host"), "n2");
	ck_assert_int_eq(json_get_int(ff, "rank", &i), 0);
	ck_assert_int_eq(i, 3);
	ranks = json_get(v, "ranks");
	ck_assert_uint_eq(ranks->n, 2);
	ck_assert_int_eq(json_at(ranks, 0)->i, 7);
	ck_assert_str_eq(json_at(ranks, 1)->str, "x");
	ck_assert_ptr_null(json_at(ranks, 2));
	ck_assert_ptr_null(json_get(v, "absent"));
	ck_assert_int_eq(json_get_int(v, "reason", &i), -1);
	ck_assert_int_eq(json_get_int(v, "loss", &i), -1);
	json_value_free(v);
	json_free(&j);
}
END_TEST

START_TEST(reader_decodes_escapes)
{
	const char text[] = "{\"s\": \"\\u00e9\\ud834\\udd1e\\n\\/\\u0000x\", \"e\": 1.5e3, \"n\": -0}";
	struct json_value *v = json_parse(text, strlen(text), err, sizeof err);
	const struct json_value *s;

	ck_assert_msg(v, "%s", err);
	s = json_get(v, "s");
	ck_assert_uint_eq(s->str_len, 2 + 4 + 1 + 1 + 1 + 1);
	ck_assert(memcmp(s->str, "\xc3\xa9\xf0\x9d\x84\x9e\n/\0x", 10) == 0);
	ck_assert(json_get(v, "e")->num == 1500.0);
	ck_assert(!json_get(v, "e")->is_int);
	ck_assert(json_get(v, "n")->is_int);
	json_value_free(v);
}
END_TEST

START_TEST(reader_rejects_bad_json_with_position)
{
	static const char *const bad[][2] = {
		{ "{\"a\": 1,}", "1:9:" },
		{ "{\"a\" 1}", "1:6:" },
		{ "[1, 2", "1:6:" },
		{ "{\n  \"a\": tru\n}", "2:8:" },
		{ "\"unterminated", "1:1:" },
		{ "[01]", "1:2:" },
		{ "{} x", "1:4:" },
		{ "", "1:1:" },
		{ "\"a\tb\"", "1:3:" },
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct json_value *v = json_parse(bad[i][0], strlen(bad[i][0]), err, sizeof err);

		ck_assert_msg(!v, "accepted %s", bad[i][0]);
		ck_assert_msg(strncmp(err, bad[i][1], strlen(bad[i][1])) == 0, "%s: \"%s\", want %s",
			      bad[i][0], err, bad[i][1]);
	}
}
END_TEST

START_TEST(reader_limits_depth)
{
	char deep[2 * (JSON_MAX_DEPTH + 1) + 1];
	struct json_value *v;

	memset(deep, '[', JSON_MAX_DEPTH + 1);
	memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
	deep[sizeof deep - 1] = '\0';
	ck_assert_ptr_null(json_parse(deep, strlen(deep), err, sizeof err));
	ck_assert_msg(strstr(err, "deeper"), "%s", err);
	/* One level less is fine. */
	v = json_parse(deep + 1, strlen(deep) - 2, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	json_value_free(v);
}
END_TEST

START_TEST(parse_file_names_the_path)
{
	char path[] = "/tmp/check_json.XXXXXX";
	int fd = mkstemp(path);
	struct json_value *v;

	ck_assert_int_eq(write(fd, "{\"k\": [1,\n  }", 13), 13);
	close(fd);
	ck_assert_ptr_null(json_parse_file(path, err, sizeof err));
	ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && strstr(err, ":2:3:"), "%s", err);
	unlink(path);
	ck_assert_ptr_null(json_parse_file(path, err, sizeof err));
	ck_assert_msg(strstr(err, path) && strstr(err, "No such file"), "%s", err);

	strcpy(path, "/tmp/check_json.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_eq(write(fd, "{\"k\": 2}\n", 9), 9);
	close(fd);
	v = json_parse_file(path, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_int_eq(json_get(v, "k")->i, 2);
	json_value_free(v);
	unlink(path);
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("json");

	tcase_add_test(tc, strings_are_escaped);
	tcase_add_test(tc, valid_utf8_passes_through);
	tcase_add_test(tc, invalid_utf8_becomes_replacement_character);
	tcase_add_test(tc, numbers_are_exact);
	tcase_add_test(tc, doubles_round_trip);
	tcase_add_test(tc, nesting_and_commas_compact);
	tcase_add_test(tc, pretty_style_indents_two_spaces);
	tcase_add_test(tc, misuse_is_reported);
	tcase_add_test(tc, reset_starts_a_new_jsonl_line);
	tcase_add_test(tc, reader_reads_what_the_writer_wrote);
	tcase_add_test(tc, reader_decodes_escapes);
	tcase_add_test(tc, reader_rejects_bad_json_with_position);
	tcase_add_test(tc, reader_limits_depth);
	tcase_add_test(tc, parse_file_names_the_path);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(json_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
