/*
 * t/unit/check_json.c - the promises of lib/stork_json on top of jansson:
 * text that is not UTF-8 still makes a file (invalid bytes become U+FFFD),
 * NaN and infinities become null, 64-bit values survive as hex, parse
 * errors name the file, line and column, and the files read back.
 *
 * Expected texts are written out by hand from RFC 8259's grammar.
 */
#include "config.h"
#include "lib/formats/stork_json.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[1024];

/* The compact JSON text of sj_text(in), as it would appear in a file. */
static void assert_text_json(const char *in, const char *want)
{
	json_t *v = sj_text(in);
	char *s;

	ck_assert_ptr_nonnull(v);
	s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	ck_assert_str_eq(s, want);
	free(s);
	json_decref(v);
}

START_TEST(valid_text_passes_through_and_is_escaped)
{
	assert_text_json("plain", "\"plain\"");
	assert_text_json("q\"b\\s", "\"q\\\"b\\\\s\"");
	assert_text_json("\n\t\x01", "\"\\n\\t\\u0001\"");
	/* é (2 bytes), € (3 bytes), 𝄞 (4 bytes). */
	assert_text_json("\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e",
			 "\"\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\"");
	assert_text_json("", "\"\"");
}
END_TEST

START_TEST(invalid_utf8_becomes_replacement_characters)
{
	/* A lone continuation byte, a truncated sequence, an overlong '/',
	 * an encoded surrogate (U+D800) and a code point above U+10FFFF. */
	assert_text_json("a\x80" "b", "\"a\xef\xbf\xbd" "b\"");
	assert_text_json("\xe2\x82", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
	assert_text_json("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
	assert_text_json("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	assert_text_json("\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	/* A Latin-1 hostname inside valid text keeps the valid part. */
	assert_text_json("n\xf6" "de-1", "\"n\xef\xbf\xbd" "de-1\"");
}
END_TEST

START_TEST(null_text_is_null)
{
	json_t *v = sj_text(NULL);

	ck_assert(json_is_null(v));
	json_decref(v);
}
END_TEST

START_TEST(non_finite_numbers_become_null_and_doubles_round_trip)
{
	static const double values[] = { 0.1, 1.0 / 3, 5.536910057067871, 1e-300, -2.5e300,
					 1763900000.123456 };
	json_t *v = json_pack("{s:o, s:o, s:o}", "nan", sj_number(NAN), "inf",
			      sj_number(INFINITY), "ninf", sj_number(-INFINITY));
	char *s = json_dumps(v, JSON_COMPACT);

	ck_assert_str_eq(s, "{\"nan\":null,\"inf\":null,\"ninf\":null}");
	free(s);
	json_decref(v);
	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		json_t *a = json_pack("[o]", sj_number(values[i])), *b;

		s = json_dumps(a, JSON_COMPACT);
		b = sj_parse(s, strlen(s), "round trip", err, sizeof err);
		ck_assert_msg(b, "%s", err);
		/* The same bits, not merely close. */
		ck_assert_msg(json_real_value(json_array_get(b, 0)) == values[i], "%s", s);
		free(s);
		json_decref(a);
		json_decref(b);
	}
}
END_TEST

START_TEST(hex64_round_trips_all_64_bits)
{
	static const uint64_t values[] = { 0, 1, 0x9155d2f52733b60aULL, UINT64_MAX };

	for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
		json_t *o = json_pack("{s:o}", "h", sj_hex64(values[i]));
		uint64_t back = 1;

		ck_assert_int_eq(strlen(json_string_value(json_object_get(o, "h"))), 16);
		ck_assert_int_eq(sj_get_hex64(o, "h", &back), 0);
		ck_assert(back == values[i]);
		json_decref(o);
	}
}
END_TEST

START_TEST(hex64_rejects_what_it_did_not_write)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "junk", "12zz", "long",
			      "00000000000000001", "num", 12, "empty", "");
	uint64_t v;

	ck_assert_int_eq(sj_get_hex64(o, "junk", &v), -1);
	ck_assert_int_eq(sj_get_hex64(o, "long", &v), -1);
	ck_assert_int_eq(sj_get_hex64(o, "num", &v), -1);
	ck_assert_int_eq(sj_get_hex64(o, "empty", &v), -1);
	ck_assert_int_eq(sj_get_hex64(o, "absent", &v), -1);
	json_decref(o);
}
END_TEST

START_TEST(typed_members_fall_back_on_absent_or_wrong_types)
{
	const char *text = "{\"i\": 7, \"r\": 2.5, \"s\": \"7\", \"big\": 9007199254740993}";
	json_t *o = sj_parse(text, strlen(text), "test", err, sizeof err);

	ck_assert_msg(o, "%s", err);
	ck_assert_int_eq(sj_int(o, "i", -1), 7);
	ck_assert_int_eq(sj_int(o, "r", -1), -1);  /* a real is not an integer */
	ck_assert_int_eq(sj_int(o, "s", -1), -1);  /* nor is a string */
	ck_assert_int_eq(sj_int(o, "absent", -1), -1);
	ck_assert_int_eq(sj_int(o, "big", -1), 9007199254740993LL); /* all 64 bits */
	ck_assert(sj_real(o, "r", 0) == 2.5);
	ck_assert(sj_real(o, "i", 0) == 7.0);       /* an integer is a number */
	ck_assert(sj_real(o, "s", -1) == -1);
	ck_assert_int_eq(sj_int(NULL, "i", 3), 3); /* no object at all */
	json_decref(o);
}
END_TEST

START_TEST(parse_errors_name_line_and_column)
{
	const char *text = "{\n  \"a\": 1,\n  \"b\": tru\n}";

	ck_assert_ptr_null(sj_parse(text, strlen(text), "slurm_env.json", err, sizeof err));
	ck_assert_msg(!strncmp(err, "slurm_env.json:3:", 17), "%s", err);
	/* Truncated, as a file cut by a dying writer. */
	ck_assert_ptr_null(sj_parse(text, 9, "cut.json", err, sizeof err));
	ck_assert_msg(!strncmp(err, "cut.json:", 9), "%s", err);
}
END_TEST

START_TEST(files_are_written_indented_and_read_back)
{
	char dir[] = "/tmp/check_json.XXXXXX", path[256], buf[256];
	json_t *v = json_pack("{s:s, s:i, s:[i, i]}", "reason", "completed", "exit_code", 0,
			      "stage", 0, 6), *back;
	FILE *f;
	size_t n;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/exit_info.json", dir);
	ck_assert_int_eq(sj_write_file(path, v, err, sizeof err), 0);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	ck_assert_str_eq(buf, "{\n  \"reason\": \"completed\",\n  \"exit_code\": 0,\n"
			      "  \"stage\": [\n    0,\n    6\n  ]\n}\n");
	back = sj_load_file(path, err, sizeof err);
	ck_assert_msg(back, "%s", err);
	ck_assert(json_equal(v, back));
	json_decref(back);
	json_decref(v);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(missing_and_damaged_files_are_named)
{
	char dir[] = "/tmp/check_json.XXXXXX", path[256];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/nowhere.json", dir);
	ck_assert_ptr_null(sj_load_file(path, err, sizeof err));
	ck_assert_msg(strstr(err, path), "%s", err);
	snprintf(path, sizeof path, "%s/cut.json", dir);
	f = fopen(path, "w");
	fputs("{\"reason\": \"compl", f);
	fclose(f);
	ck_assert_ptr_null(sj_load_file(path, err, sizeof err));
	ck_assert_msg(!strncmp(err, path, strlen(path)) && err[strlen(path)] == ':', "%s", err);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(strict_files_refuse_twice_named_keys_size_and_non_files)
{
	char dir[] = "/tmp/check_json.XXXXXX", path[256];
	json_t *v;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/config.json", dir);
	f = fopen(path, "w");
	fputs("{\"a\": {\"b\": 1, \"c\": 2}}\n", f);
	fclose(f);
	v = sj_load_file_strict(path, 1000, err, sizeof err);
	ck_assert_msg(v, "%s", err);
	ck_assert_int_eq(sj_int(json_object_get(v, "a"), "c", 0), 2);
	json_decref(v);
	/* larger than max */
	ck_assert_ptr_null(sj_load_file_strict(path, 10, err, sizeof err));
	ck_assert_msg(strstr(err, path) && strstr(err, "24 bytes, more than the 10"), "%s", err);
	/* a key twice, at any depth */
	f = fopen(path, "w");
	fputs("{\"a\": {\"b\": 1, \"b\": 2}}", f);
	fclose(f);
	ck_assert_ptr_null(sj_load_file_strict(path, 1000, err, sizeof err));
	ck_assert_msg(!strncmp(err, path, strlen(path)) && strstr(err, "duplicate"), "%s", err);
	unlink(path);
	/* a directory, a missing file */
	ck_assert_ptr_null(sj_load_file_strict(dir, 1000, err, sizeof err));
	ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
	ck_assert_ptr_null(sj_load_file_strict(path, 1000, err, sizeof err));
	ck_assert_msg(strstr(err, path) && strstr(err, "No such file"), "%s", err);
	rmdir(dir);
}
END_TEST

START_TEST(compact_is_one_line)
{
	json_t *v = json_pack("{s:s, s:I, s:o}", "metric", "train_loss", "step", (json_int_t)3,
			      "value", sj_number(2.5));
	char *s = sj_compact(v);

	ck_assert_str_eq(s, "{\"metric\":\"train_loss\",\"step\":3,\"value\":2.5}");
	free(s);
	json_decref(v);
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("stork_json");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, valid_text_passes_through_and_is_escaped);
	tcase_add_test(tc, invalid_utf8_becomes_replacement_characters);
	tcase_add_test(tc, null_text_is_null);
	tcase_add_test(tc, non_finite_numbers_become_null_and_doubles_round_trip);
	tcase_add_test(tc, hex64_round_trips_all_64_bits);
	tcase_add_test(tc, hex64_rejects_what_it_did_not_write);
	tcase_add_test(tc, typed_members_fall_back_on_absent_or_wrong_types);
	tcase_add_test(tc, parse_errors_name_line_and_column);
	tcase_add_test(tc, files_are_written_indented_and_read_back);
	tcase_add_test(tc, missing_and_damaged_files_are_named);
	tcase_add_test(tc, strict_files_refuse_twice_named_keys_size_and_non_files);
	tcase_add_test(tc, compact_is_one_line);
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
