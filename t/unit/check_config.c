/*
 * t/unit/check_config.c - the promises of lib/stork_config: every key of
 * stork.yaml(5) is read, defaults are filled in, every kind of mistake is
 * reported with FILE:LINE:COLUMN and the key path, overrides go through the
 * same checks, the resolved YAML reads back to the same configuration, and
 * the hashes are stable and sensitive.
 *
 * The fixtures live in t/data/config/. Each expected position was counted
 * by hand from the fixture text (1-based line and column of the offending
 * key or value), not taken from the program's output.
 */
#include "config.h"
#include "lib/config/stork_config.h"
#include "lib/run/stage_path.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DATA STORK_TEST_DATA "/config/"

static char err[1024];

/* Load a fixture and run the cross-key checks, as the launcher does. */
static int load_validate(struct stork_config *c, const char *name)
{
	if (config_load(c, name, err, sizeof err) < 0)
		return -1;
	return config_validate(c, err, sizeof err);
}

/* The fixture must fail, with a message that contains every fragment. */
static void assert_error(const char *fixture, const char *const *fragments)
{
	struct stork_config c;

	err[0] = '\0';
	ck_assert_msg(load_validate(&c, fixture) < 0, "%s was accepted", fixture);
	for (int i = 0; fragments[i]; i++)
		ck_assert_msg(strstr(err, fragments[i]), "%s: message \"%s\" lacks \"%s\"",
			      fixture, err, fragments[i]);
	config_free(&c);
}

#define ASSERT_ERROR(fixture, ...) \
	assert_error(DATA fixture, (const char *const[]){ __VA_ARGS__, NULL })

/* ------------------------------------------------------------ defaults */

START_TEST(defaults_fill_every_key)
{
	struct stork_config c;

	config_init(&c);
	ck_assert_int_eq(config_validate(&c, err, sizeof err), 0);
	ck_assert_str_eq(c.run.name, "stork");
	ck_assert_str_eq(c.run.dir, "runs");
	ck_assert(c.run.rendezvous_timeout == 300.0);
	ck_assert_str_eq(c.model.init_from, "");
	ck_assert_int_eq(c.model.layers, 4);
	ck_assert_int_eq(c.model.heads, 4);
	ck_assert_int_eq(c.model.channels, 128);
	ck_assert_int_eq(c.model.max_seq_len, 1024);
	ck_assert_int_eq(c.model.vocab_size, 50257);
	/* 50257 / 128 = 392.6..., so the next multiple is 393 * 128. */
	ck_assert_int_eq(c.model.padded_vocab_size, 393 * 128);
	ck_assert_uint_eq(c.model.seed, 1337);
	ck_assert_uint_eq(c.data.train.n, 1);
	ck_assert_str_eq(c.data.train.v[0], "data/*_train.bin");
	ck_assert_uint_eq(c.data.val.n, 1);
	ck_assert_str_eq(c.data.val.v[0], "data/*_val.bin");
	ck_assert(c.data.shuffle);
	ck_assert_int_eq(c.train.batch_size, 4);
	ck_assert_int_eq(c.train.seq_len, 64);
	ck_assert_int_eq(c.train.grad_accum, 1);
	ck_assert_int_eq(c.train.steps, 1000);
	ck_assert(c.train.lr == 6.0e-4);
	ck_assert_int_eq(c.train.lr_schedule, STORK_LR_COSINE);
	ck_assert_int_eq(c.train.precision, STORK_PRECISION_AUTO);
	ck_assert_int_eq(c.run.device, STORK_DEVICE_AUTO);
	ck_assert_int_eq(c.train.warmup_steps, 100);
	ck_assert(c.train.min_lr == 6.0e-5);
	ck_assert(c.train.weight_decay == 0.1);
	ck_assert(c.train.beta1 == 0.9);
	ck_assert(c.train.beta2 == 0.95);
	ck_assert(c.train.eps == 1.0e-8);
	ck_assert(c.train.grad_clip == 1.0);
	ck_assert_int_eq(c.train.val_every, 100);
	ck_assert_int_eq(c.train.val_batches, 10);
	ck_assert_int_eq(c.train.log_every, 1);
	ck_assert_int_eq(c.checkpoint.every, 200);
	ck_assert_int_eq(c.checkpoint.keep, 3);
	ck_assert_int_eq(c.preempt.signal, SIGUSR1);
	ck_assert(c.preempt.hang_timeout == 600.0);
	ck_assert_int_eq(c.parallel.local_ranks, 0);
	ck_assert_int_eq(c.parallel.tensor, 1);
	ck_assert_int_eq(c.parallel.pipeline, 1);
	ck_assert_int_eq(c.parallel.zero, 0);
	config_free(&c);
}
END_TEST

START_TEST(padded_vocab_rounds_up_to_128)
{
	static const int vocab[][2] = { { 257, 384 }, { 256, 256 }, { 1, 128 }, { 129, 256 } };
	struct stork_config c;
	char set[64];

	for (size_t i = 0; i < sizeof vocab / sizeof vocab[0]; i++) {
		config_init(&c);
		snprintf(set, sizeof set, "model.vocab_size=%d", vocab[i][0]);
		ck_assert_int_eq(config_set(&c, set, err, sizeof err), 0);
		ck_assert_int_eq(config_validate(&c, err, sizeof err), 0);
		ck_assert_int_eq(c.model.padded_vocab_size, vocab[i][1]);
		config_free(&c);
	}
}
END_TEST

START_TEST(empty_file_gives_defaults)
{
	struct stork_config c, d;

	ck_assert_int_eq(load_validate(&c, DATA "empty.yaml"), 0);
	config_init(&d);
	config_validate(&d, err, sizeof err);
	ck_assert(config_equal(&c, &d));
	config_free(&c);
	config_free(&d);
}
END_TEST

START_TEST(example_in_etc_equals_defaults)
{
	struct stork_config c, d;

	ck_assert_msg(load_validate(&c, STORK_TEST_DATA "/../../etc/stork.yaml") == 0, "%s", err);
	config_init(&d);
	config_validate(&d, err, sizeof err);
	ck_assert(config_equal(&c, &d));
	config_free(&c);
	config_free(&d);
}
END_TEST

/* ------------------------------------------------------------ good files */

START_TEST(every_key_is_read)
{
	struct stork_config c;

	ck_assert_msg(load_validate(&c, DATA "full.yaml") == 0, "%s", err);
	ck_assert_str_eq(c.run.name, "full");
	ck_assert_str_eq(c.run.dir, "/tmp/stork-runs");
	ck_assert(c.run.rendezvous_timeout == 42.5);
	ck_assert_str_eq(c.model.init_from, "gpt2_124M.bin");
	ck_assert_int_eq(c.model.layers, 12);
	ck_assert_int_eq(c.model.heads, 12);
	ck_assert_int_eq(c.model.channels, 768);
	ck_assert_int_eq(c.model.max_seq_len, 512);
	ck_assert_int_eq(c.model.vocab_size, 50000);
	ck_assert_int_eq(c.model.padded_vocab_size, 50304);
	ck_assert_uint_eq(c.model.seed, UINT64_MAX);
	ck_assert_uint_eq(c.data.train.n, 2);
	ck_assert_str_eq(c.data.train.v[0], "a/*_train.bin");
	ck_assert_str_eq(c.data.train.v[1], "b/*_train.bin");
	ck_assert_uint_eq(c.data.val.n, 1);
	ck_assert_str_eq(c.data.val.v[0], "c/val.bin");
	ck_assert(!c.data.shuffle);
	ck_assert_int_eq(c.train.batch_size, 8);
	ck_assert_int_eq(c.train.seq_len, 128);
	ck_assert_int_eq(c.train.grad_accum, 2);
	ck_assert_int_eq(c.train.steps, 50);
	ck_assert(c.train.lr == 1.0e-3);
	ck_assert_int_eq(c.train.lr_schedule, STORK_LR_CONSTANT);
	ck_assert_int_eq(c.train.precision, STORK_PRECISION_TF32);
	ck_assert_int_eq(c.run.device, STORK_DEVICE_CPU);
	ck_assert_int_eq(c.train.warmup_steps, 5);
	ck_assert(c.train.min_lr == 0.0);
	ck_assert(c.train.weight_decay == 0.0);
	ck_assert(c.train.beta1 == 0.8);
	ck_assert(c.train.beta2 == 0.99);
	ck_assert(c.train.eps == 1e-6);
	ck_assert(c.train.grad_clip == 0.0);
	ck_assert_int_eq(c.train.val_every, 0);
	ck_assert_int_eq(c.train.val_batches, 3);
	ck_assert_int_eq(c.train.log_every, 5);
	ck_assert_int_eq(c.checkpoint.every, 0);
	ck_assert_int_eq(c.checkpoint.keep, 0);
	ck_assert_int_eq(c.preempt.signal, SIGTERM);
	ck_assert(c.preempt.hang_timeout == 0.0);
	ck_assert_int_eq(c.parallel.local_ranks, 2);
	ck_assert_int_eq(c.parallel.tensor, 4);
	ck_assert_int_eq(c.parallel.pipeline, 2);
	ck_assert_int_eq(c.parallel.zero, 1);
	config_free(&c);
}
END_TEST

START_TEST(order_and_yaml_style_do_not_matter)
{
	struct stork_config a, b;

	ck_assert_msg(load_validate(&a, DATA "full.yaml") == 0, "%s", err);
	ck_assert_msg(load_validate(&b, DATA "reordered.yaml") == 0, "%s", err);
	ck_assert(config_equal(&a, &b));
	ck_assert_uint_eq(config_hash(&a), config_hash(&b));
	config_free(&a);
	config_free(&b);
}
END_TEST

/* ------------------------------------------------------------ bad files */

START_TEST(missing_file_names_the_path)
{
	ASSERT_ERROR("no-such-file.yaml", DATA "no-such-file.yaml", "No such file");
}
END_TEST

START_TEST(unknown_key_is_an_error_at_the_key)
{
	ASSERT_ERROR("err_unknown_key.yaml", "err_unknown_key.yaml:3:3:", "train.stepz", "unknown key",
		     "batch_size, seq_len", "steps");
}
END_TEST

START_TEST(unknown_section_is_an_error_at_the_key)
{
	ASSERT_ERROR("err_unknown_section.yaml", "err_unknown_section.yaml:3:1:", "trian",
		     "run, model, data, train, checkpoint, preempt, preflight, restart, parallel");
}
END_TEST

START_TEST(wrong_type_is_an_error_at_the_value)
{
	ASSERT_ERROR("err_not_integer.yaml", "err_not_integer.yaml:2:11:", "model.layers",
		     "expected an integer >= 1", "'twelve'");
	ASSERT_ERROR("err_not_number.yaml", "err_not_number.yaml:2:7:", "train.lr", "expected a number >= 0");
	ASSERT_ERROR("err_bool.yaml", "err_bool.yaml:2:12:", "data.shuffle", "true or false", "'yes'");
	ASSERT_ERROR("err_section_scalar.yaml", "err_section_scalar.yaml:1:8:", "train",
		     "expected a mapping", "batch_size");
	ASSERT_ERROR("err_root_list.yaml", "err_root_list.yaml:1:1:", "expected a mapping of sections");
}
END_TEST

START_TEST(quoted_number_is_a_string)
{
	ASSERT_ERROR("err_quoted_integer.yaml", "err_quoted_integer.yaml:2:10:", "train.steps",
		     "remove the quotes");
}
END_TEST

START_TEST(zero_or_negative_size_is_an_error)
{
	ASSERT_ERROR("err_zero_size.yaml", "err_zero_size.yaml:2:15:", "train.batch_size",
		     "expected an integer >= 1", "'0'");
	ASSERT_ERROR("err_negative_size.yaml", "err_negative_size.yaml:2:13:", "model.channels",
		     "expected an integer >= 1", "'-768'");
}
END_TEST

START_TEST(out_of_range_number_is_an_error)
{
	ASSERT_ERROR("err_beta_range.yaml", "err_beta_range.yaml:2:10:", "train.beta2", "[0, 1)");
}
END_TEST

START_TEST(enums_list_the_accepted_values)
{
	ASSERT_ERROR("err_lr_schedule.yaml", "err_lr_schedule.yaml:2:16:", "train.lr_schedule",
		     "one of constant, cosine", "'linear'");
	ASSERT_ERROR("err_signal.yaml", "err_signal.yaml:2:11:", "preempt.signal",
		     "one of USR1, USR2, TERM", "'SIGUSR1'");
	ASSERT_ERROR("err_zero.yaml", "err_zero.yaml:2:9:", "parallel.zero", "from 0 to 3");
	ASSERT_ERROR("err_device.yaml", "err_device.yaml:2:11:", "run.device",
		     "one of auto, cpu, cuda", "'gpu'");
	ASSERT_ERROR("err_precision.yaml", "err_precision.yaml:2:14:", "train.precision",
		     "one of fp32, tf32, bf16", "'fp16'");
	ASSERT_ERROR("err_recompute.yaml", "err_recompute.yaml:2:14:", "train.recompute",
		     "one of none, gelu, block", "'all'");
	ASSERT_ERROR("err_nonfinite.yaml", "err_nonfinite.yaml:2:17:", "train.on_nonfinite",
		     "one of stop, skip, rollback", "'retry'");
}
END_TEST

START_TEST(heads_must_divide_channels)
{
	ASSERT_ERROR("err_heads_channels.yaml", "err_heads_channels.yaml:2:10:", "model.heads",
		     "does not divide", "model.channels = 768 (", "err_heads_channels.yaml:3:13)");
}
END_TEST

START_TEST(malformed_yaml_gives_the_position)
{
	/* "  name: a: b": the second ':' (column 10) starts a mapping value
	 * where a plain scalar cannot have one. */
	ASSERT_ERROR("err_malformed.yaml", "err_malformed.yaml:2:10:", "malformed YAML",
		     "mapping values are not allowed");
}
END_TEST

START_TEST(duplicate_key_is_an_error)
{
	ASSERT_ERROR("err_duplicate.yaml", "err_duplicate.yaml:3:3:", "train.steps", "duplicate key",
		     "first set at " DATA "err_duplicate.yaml:2:3");
}
END_TEST

START_TEST(glob_lists_hold_only_strings)
{
	ASSERT_ERROR("err_glob_item.yaml", "err_glob_item.yaml:2:20:", "data.train", "got a mapping");
	ASSERT_ERROR("err_no_train.yaml", "err_no_train.yaml:2:10:", "data.train", "at least one");
}
END_TEST

START_TEST(only_one_document)
{
	ASSERT_ERROR("err_two_documents.yaml", "err_two_documents.yaml:4:1:", "second YAML document");
}
END_TEST

/* ------------------------------------------------------------ overrides */

START_TEST(override_sets_a_key)
{
	struct stork_config c;

	config_init(&c);
	ck_assert_int_eq(config_set(&c, "train.steps=50", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.lr=1e-3", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "preempt.signal=USR2", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "parallel.local_ranks=auto", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "model.init_from=", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "run.name=it's \"mine\"", err, sizeof err), 0);
	ck_assert_int_eq(c.train.steps, 50);
	ck_assert(c.train.lr == 1e-3);
	ck_assert_int_eq(c.preempt.signal, SIGUSR2);
	ck_assert_int_eq(c.parallel.local_ranks, 0);
	ck_assert_str_eq(c.model.init_from, "");
	ck_assert_str_eq(c.run.name, "it's \"mine\"");
	config_free(&c);
}
END_TEST

START_TEST(override_sets_glob_lists)
{
	struct stork_config c;

	config_init(&c);
	ck_assert_int_eq(config_set(&c, "data.train=[a.bin, \"b c.bin\"]", err, sizeof err), 0);
	ck_assert_uint_eq(c.data.train.n, 2);
	ck_assert_str_eq(c.data.train.v[0], "a.bin");
	ck_assert_str_eq(c.data.train.v[1], "b c.bin");
	/* A bare glob starting with '*' is a glob, not a YAML alias. */
	ck_assert_int_eq(config_set(&c, "data.train=*.bin", err, sizeof err), 0);
	ck_assert_uint_eq(c.data.train.n, 1);
	ck_assert_str_eq(c.data.train.v[0], "*.bin");
	ck_assert_int_eq(config_set(&c, "data.val=[]", err, sizeof err), 0);
	ck_assert_uint_eq(c.data.val.n, 0);
	config_free(&c);
}
END_TEST

START_TEST(bad_override_names_the_override)
{
	static const char *const cases[][3] = {
		{ "model.layers=0", "override 'model.layers=0'", "model.layers" },
		{ "train.stepz=1", "train.stepz", "batch_size" },
		{ "nosuch=1", "nosuch", "run, model" },
		{ "train.steps", "override 'train.steps'", "SECTION.KEY=VALUE" },
		{ "run.name=a/b", "run.name", "without '/'" },
		{ "train.steps=\"5\"", "train.steps", "remove the quotes" },
		{ "train.steps=[1", "train.steps", "malformed" },
		{ "parallel.zero=4", "parallel.zero", "from 0 to 3" },
	};
	struct stork_config c;

	config_init(&c);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = '\0';
		ck_assert_msg(config_set(&c, cases[i][0], err, sizeof err) < 0, "%s accepted", cases[i][0]);
		ck_assert_msg(strstr(err, cases[i][1]) && strstr(err, cases[i][2]),
			      "%s: message \"%s\"", cases[i][0], err);
	}
	/* Nothing was changed by the rejected overrides. */
	ck_assert_int_eq(c.model.layers, 4);
	ck_assert_int_eq(c.parallel.zero, 0);
	config_free(&c);
}
END_TEST

START_TEST(override_after_file_wins_and_cross_checks_name_it)
{
	struct stork_config c;

	ck_assert_int_eq(config_load(&c, DATA "full.yaml", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "model.heads=7", err, sizeof err), 0);
	ck_assert_int_eq(config_validate(&c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "override 'model.heads=7'") && strstr(err, "full.yaml:11:13"), "%s", err);
	config_free(&c);

	/* An override can also repair a file's cross-key mistake. */
	ck_assert_int_eq(config_load(&c, DATA "err_heads_channels.yaml", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "model.heads=6", err, sizeof err), 0);
	ck_assert_msg(config_validate(&c, err, sizeof err) == 0, "%s", err);
	config_free(&c);
}
END_TEST

START_TEST(cross_key_checks)
{
	static const char *const cases[][3] = {
		{ "model.padded_vocab_size=100", "model.vocab_size=200", "padded_vocab_size" },
		{ "train.seq_len=2048", "model.max_seq_len=1024", "max_seq_len" },
		{ "train.min_lr=0.1", "train.lr=0.01", "train.min_lr" },
		{ "parallel.tensor=3", "model.heads=4", "parallel.tensor" },
		{ "parallel.pipeline=5", "model.layers=4", "parallel.pipeline" },
		/* only the engine keeps its replicas' state itself */
		{ "restart.in_place=true", "program.command=[python3, t.py]", "program.command" },
		/* the .prom file holds the engine's figures; a program writes its own */
		{ "metrics.prometheus_dir=/tmp/p", "program.command=[python3, t.py]", "program.command" },
		/* ZeRO-2 and 3 keep no copy of a part */
		{ "parallel.zero=3", "restart.in_place=true", "restart.in_place" },
		{ "restart.spares=1", "restart.in_place=false", "restart.spares" },
		/* a rejoin needs a run that went on without the node */
		{ "restart.rejoin=false", "restart.in_place=false", "restart.rejoin" },
	};
	struct stork_config c;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		config_init(&c);
		ck_assert_int_eq(config_set(&c, cases[i][0], err, sizeof err), 0);
		ck_assert_int_eq(config_set(&c, cases[i][1], err, sizeof err), 0);
		ck_assert_msg(config_validate(&c, err, sizeof err) < 0, "%s accepted", cases[i][0]);
		ck_assert_msg(strstr(err, cases[i][2]) && strstr(err, cases[i][0]), "%s", err);
		config_free(&c);
	}
	/* a micro-batch of more tokens than an int counts */
	config_init(&c);
	ck_assert_int_eq(config_set(&c, "model.max_seq_len=2048", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.seq_len=2048", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.batch_size=1048576", err, sizeof err), 0);
	ck_assert_msg(config_validate(&c, err, sizeof err) < 0, "2^31 tokens accepted");
	ck_assert_msg(strstr(err, "2147483648 tokens per micro-step, more than 2147483647"), "%s", err);
	config_free(&c);
	/* ZeRO-1 in place: each part of the optimizer state has a copy on a second replica */
	config_init(&c);
	ck_assert_int_eq(config_set(&c, "restart.in_place=true", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "parallel.zero=1", err, sizeof err), 0);
	ck_assert_msg(config_validate(&c, err, sizeof err) == 0, "%s", err);
	config_free(&c);
}
END_TEST

/* ------------------------------------------------------------ round trip */

static void assert_round_trip(struct stork_config *c)
{
	struct stork_config d;
	char *text = config_to_yaml(c);

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(config_load_string(&d, text, "resolved", err, sizeof err) == 0, "%s\n%s", err, text);
	ck_assert_msg(config_validate(&d, err, sizeof err) == 0, "%s", err);
	ck_assert_msg(config_equal(c, &d), "round trip differs:\n%s", text);
	ck_assert_uint_eq(config_hash(c), config_hash(&d));
	free(text);
	config_free(&d);
}

START_TEST(resolved_yaml_reads_back_equal)
{
	struct stork_config c;

	config_init(&c);
	config_validate(&c, err, sizeof err);
	assert_round_trip(&c);
	config_free(&c);

	ck_assert_int_eq(load_validate(&c, DATA "full.yaml"), 0);
	assert_round_trip(&c);
	config_free(&c);

	/* Awkward strings and doubles survive. */
	config_init(&c);
	ck_assert_int_eq(config_set(&c, "run.name=a \"b\" \\c: #d ü\t", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "data.val=[\"*x\", \"-y\", \"[z]\", \"&a\"]", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.lr=0.1", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.eps=3.0e-300", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.beta2=0.99999999999999989", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "model.padded_vocab_size=60000", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "run.rendezvous_timeout=1e16", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "preempt.hang_timeout=123456.789", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.weight_decay=1e-5", err, sizeof err), 0);
	ck_assert_int_eq(config_set(&c, "train.min_lr=1.5e-6", err, sizeof err), 0);
	ck_assert_int_eq(config_validate(&c, err, sizeof err), 0);
	assert_round_trip(&c);
	config_free(&c);
}
END_TEST

START_TEST(written_file_reads_back_equal)
{
	struct stork_config c, d;
	char path[] = "/tmp/check_config.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	ck_assert_int_eq(load_validate(&c, DATA "full.yaml"), 0);
	ck_assert_int_eq(config_write_yaml(&c, f), 0);
	fclose(f);
	ck_assert_msg(load_validate(&d, path) == 0, "%s", err);
	ck_assert(config_equal(&c, &d));
	unlink(path);
	config_free(&c);
	config_free(&d);
}
END_TEST

/* ------------------------------------------------------------ hashes */

START_TEST(hash_is_stable)
{
	struct stork_config a, b;

	config_init(&a);
	config_init(&b);
	config_validate(&a, err, sizeof err);
	config_validate(&b, err, sizeof err);
	ck_assert_uint_eq(config_hash(&a), config_hash(&b));
	ck_assert_uint_eq(config_model_hash(&a), config_model_hash(&b));
	/* Setting a key to the value it has changes nothing. */
	ck_assert_int_eq(config_set(&b, "train.lr=0.0006", err, sizeof err), 0);
	ck_assert_uint_eq(config_hash(&a), config_hash(&b));
	ck_assert(config_hash(&a) != 0);
	config_free(&a);
	config_free(&b);
}
END_TEST

START_TEST(hash_changes_with_every_key)
{
	/* One changed value per key; each must change config_hash. */
	static const char *const sets[] = {
		"run.name=x", "run.dir=x", "run.rendezvous_timeout=301", "model.init_from=x",
		"model.layers=8", "model.heads=8", "model.channels=256", "model.max_seq_len=512",
		"model.vocab_size=257", "model.padded_vocab_size=50432", "model.seed=1338",
		"model.arch=llama", "model.kv_heads=2", "model.intermediate_size=384",
		"model.tie_embeddings=true", "model.rms_norm_eps=1e-6", "model.rope_theta=10000",
		"model.rope_scaling_factor=8", "model.rope_low_freq_factor=2",
		"model.rope_high_freq_factor=8", "model.rope_original_max_positions=4096",
		"data.train=x", "data.val=[]", "data.shuffle=false", "train.batch_size=5",
		"train.seq_len=65", "train.grad_accum=2", "train.steps=999", "train.lr=0.0007",
		"train.lr_schedule=constant", "train.warmup_steps=99", "train.min_lr=0",
		"train.precision=tf32", "run.device=cuda", "train.on_nonfinite=skip",
		"train.weight_decay=0", "train.beta1=0.8", "train.beta2=0.9", "train.eps=1e-7",
		"train.grad_clip=0", "train.val_every=0", "train.val_batches=9", "train.log_every=2",
		"checkpoint.every=100", "checkpoint.keep=1", "checkpoint.max_failures=1", "preempt.signal=TERM",
		"preempt.hang_timeout=60", "preempt.deadline_guard=false", "preempt.deadline_lead=5", "parallel.local_ranks=2", "parallel.tensor=2",
		"parallel.pipeline=2", "parallel.zero=1",
		"run.resume_from=x", "run.max_gpu_hours=10", "run.shared=true", "data.prefetch=false",
		"data.stage_dir=x",
		"data.sha256=x", "data.ca_file=x", "data.netrc=x", "data.token_env=X",
		"data.downloads=2", "data.max_stage_bytes=1000", "train.recompute=block", "train.fused=false",
		"train.max_rollbacks=1", "restart.max_restarts=1", "parallel.overlap=true",
		"restart.in_place=true", "restart.in_place_wait=30", "restart.spares=1",
		"restart.rejoin=false",
		"train.on_spike=skip", "train.spike_window=40", "train.spike_zscore=5",
		"train.spike_min_steps=10", "train.spike_max_in_row=4",
		"parallel.merge_tasks=false", "checkpoint.async=true",
		"checkpoint.local_dir=/x", "checkpoint.persist_every=2",
		"parallel.stage_split=compute", "preflight.enabled=false", "preflight.tolerance=0.5",
		"program.command=[a, b]", "program.tee=all", "program.signal=TERM",
		"program.kill_grace=1", "program.checkpoint_grace=5", "program.pmix=false",
		"checkpoint.every_minutes=30", "checkpoint.keep_every=1000", "checkpoint.mtbf_hours=2",
		"notify.url=https://hooks.example.org/x", "notify.events=[failed]", "notify.timeout=9",
		"metrics.sample_s=2", "metrics.prometheus_dir=/x", "metrics.tensorboard=false",
	};
	struct stork_config base, c;
	uint64_t h0;

	/* the list covers every key there is */
	for (size_t k = 0; k < config_key_count(); k++) {
		const char *path = config_key_path(k);
		int listed = 0;

		for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
			listed |= !strncmp(sets[i], path, strlen(path)) && sets[i][strlen(path)] == '=';
		ck_assert_msg(listed, "%s has no case in hash_changes_with_every_key", path);
	}
	config_init(&base);
	ck_assert_int_eq(config_validate(&base, err, sizeof err), 0);
	h0 = config_hash(&base);
	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		/* a pipeline needs a micro-batch per stage: compare with a base that has them */
		int pipe = !strncmp(sets[i], "parallel.pipeline", 17);
		/* checkpoint.mtbf_hours: against a base with checkpoint.every auto */
		int young = !strncmp(sets[i], "checkpoint.mtbf_hours", 21);
		/* restart.spares, restart.rejoin: against a base with restart.in_place */
		int spares = !strncmp(sets[i], "restart.spares", 14) ||
			     !strncmp(sets[i], "restart.rejoin", 14);
		/* a Llama setting: against a Llama base (under gpt2 it is refused) */
		int llama = !strncmp(sets[i], "model.", 6) && strncmp(sets[i], "model.arch", 10) &&
			    (strstr(sets[i], "rope") || strstr(sets[i], "kv_heads") ||
			     strstr(sets[i], "intermediate") || strstr(sets[i], "tie_") ||
			     strstr(sets[i], "rms_"));
		struct stork_config b2;

		config_init(&b2);
		config_init(&c);
		if (pipe) {
			ck_assert_int_eq(config_set(&b2, "train.grad_accum=2", err, sizeof err), 0);
			ck_assert_int_eq(config_set(&c, "train.grad_accum=2", err, sizeof err), 0);
			ck_assert_int_eq(config_validate(&b2, err, sizeof err), 0);
		}
		if (young) {
			ck_assert_int_eq(config_set(&b2, "checkpoint.every=auto", err, sizeof err), 0);
			ck_assert_int_eq(config_set(&c, "checkpoint.every=auto", err, sizeof err), 0);
			ck_assert_int_eq(config_validate(&b2, err, sizeof err), 0);
			pipe = 1; /* compare with b2 */
		}
		if (spares) {
			ck_assert_int_eq(config_set(&b2, "restart.in_place=true", err, sizeof err), 0);
			ck_assert_int_eq(config_set(&c, "restart.in_place=true", err, sizeof err), 0);
			ck_assert_int_eq(config_validate(&b2, err, sizeof err), 0);
			pipe = 1; /* compare with b2 */
		}
		if (llama) {
			ck_assert_int_eq(config_set(&b2, "model.arch=llama", err, sizeof err), 0);
			ck_assert_int_eq(config_set(&c, "model.arch=llama", err, sizeof err), 0);
			ck_assert_int_eq(config_validate(&b2, err, sizeof err), 0);
			pipe = 1; /* compare with b2 */
		}
		ck_assert_msg(config_set(&c, sets[i], err, sizeof err) == 0, "%s", err);
		ck_assert_msg(config_validate(&c, err, sizeof err) == 0, "%s: %s", sets[i], err);
		ck_assert_msg(config_hash(&c) != (pipe ? config_hash(&b2) : h0),
			      "%s does not change the hash", sets[i]);
		ck_assert_msg(!config_equal(&c, pipe ? &b2 : &base), "%s: config_equal sees no change",
			      sets[i]);
		config_free(&c);
		config_free(&b2);
	}
	config_free(&base);
}
END_TEST

START_TEST(model_hash_covers_the_shape_only)
{
	static const char *const shape[] = {
		"model.layers=8", "model.heads=8", "model.channels=256", "model.max_seq_len=512",
		"model.vocab_size=257", "model.padded_vocab_size=50432", "model.arch=llama",
	};
	static const char *const other[] = {
		"train.lr=0.1", "run.name=x", "model.seed=1", "model.init_from=x.bin", "parallel.zero=1",
	};
	struct stork_config base, c;
	uint64_t h0;

	config_init(&base);
	config_validate(&base, err, sizeof err);
	h0 = config_model_hash(&base);
	for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
		config_init(&c);
		config_set(&c, shape[i], err, sizeof err);
		ck_assert_msg(config_validate(&c, err, sizeof err) == 0, "%s", err);
		ck_assert_msg(config_model_hash(&c) != h0, "%s keeps the model hash", shape[i]);
		config_free(&c);
	}
	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
		config_init(&c);
		config_set(&c, other[i], err, sizeof err);
		config_validate(&c, err, sizeof err);
		ck_assert_msg(config_model_hash(&c) == h0, "%s changes the model hash", other[i]);
		config_free(&c);
	}
	config_free(&base);
}
END_TEST

/* "https://?x" names no host: refused with the key, and no staged file is named after nothing. */
START_TEST(a_data_url_without_a_host_is_refused)
{
	struct stork_config c;
	char path[64];

	config_init(&c);
	ck_assert_int_eq(config_set(&c, "data.train=[https://?x]", err, sizeof err), 0);
	ck_assert_int_lt(config_validate(&c, err, sizeof err), 0);
	ck_assert_msg(strstr(err, "data.train: https://") && strstr(err, " has no host"), "%s", err);
	config_free(&c);
	memset(path, 'z', sizeof path);
	ck_assert_int_eq(stage_local_path("/stage", "https://?x", path, sizeof path), -1);
	ck_assert_int_eq(stage_local_path("/stage", "https://h/x.bin?sig", path, sizeof path), 0);
	ck_assert_str_eq(path, "/stage/h_2fx.bin");
	ck_assert_int_eq(stage_local_path("/stage", "https://..", path, sizeof path), 0);
	ck_assert_str_eq(path, "/stage/_2e.");
}
END_TEST

START_TEST(names_of_enum_values)
{
	ck_assert_str_eq(config_signal_name(SIGUSR1), "USR1");
	ck_assert_str_eq(config_signal_name(SIGTERM), "TERM");
	ck_assert_str_eq(config_precision_name(STORK_PRECISION_FP32), "fp32");
	ck_assert_str_eq(config_precision_name(STORK_PRECISION_TF32), "tf32");
	ck_assert_str_eq(config_precision_name(STORK_PRECISION_AUTO), "auto");
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	/* hash_changes_with_every_key loads a configuration per key: over
	 * Check's 4 s under AddressSanitizer on a busy 2-core machine */
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, defaults_fill_every_key);
	tcase_add_test(tc, padded_vocab_rounds_up_to_128);
	tcase_add_test(tc, empty_file_gives_defaults);
	tcase_add_test(tc, example_in_etc_equals_defaults);
	tcase_add_test(tc, every_key_is_read);
	tcase_add_test(tc, order_and_yaml_style_do_not_matter);
	tcase_add_test(tc, missing_file_names_the_path);
	tcase_add_test(tc, unknown_key_is_an_error_at_the_key);
	tcase_add_test(tc, unknown_section_is_an_error_at_the_key);
	tcase_add_test(tc, wrong_type_is_an_error_at_the_value);
	tcase_add_test(tc, quoted_number_is_a_string);
	tcase_add_test(tc, zero_or_negative_size_is_an_error);
	tcase_add_test(tc, out_of_range_number_is_an_error);
	tcase_add_test(tc, enums_list_the_accepted_values);
	tcase_add_test(tc, heads_must_divide_channels);
	tcase_add_test(tc, malformed_yaml_gives_the_position);
	tcase_add_test(tc, duplicate_key_is_an_error);
	tcase_add_test(tc, glob_lists_hold_only_strings);
	tcase_add_test(tc, only_one_document);
	tcase_add_test(tc, override_sets_a_key);
	tcase_add_test(tc, override_sets_glob_lists);
	tcase_add_test(tc, bad_override_names_the_override);
	tcase_add_test(tc, override_after_file_wins_and_cross_checks_name_it);
	tcase_add_test(tc, cross_key_checks);
	tcase_add_test(tc, resolved_yaml_reads_back_equal);
	tcase_add_test(tc, written_file_reads_back_equal);
	tcase_add_test(tc, hash_is_stable);
	tcase_add_test(tc, hash_changes_with_every_key);
	tcase_add_test(tc, model_hash_covers_the_shape_only);
	tcase_add_test(tc, names_of_enum_values);
	tcase_add_test(tc, a_data_url_without_a_host_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
