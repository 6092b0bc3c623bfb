/*
 * lib/config/config_write.c - a configuration said back: the resolved YAML
 * (config.yaml of a run directory), equality, and the hashes that tell
 * whether a checkpoint was made under the same settings.
 */
#include "config.h"
#include "lib/config/stork_config.h"
#include "lib/config/config_keys.h"
#include "lib/url.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* --------------------------------------------------------------- output */

/*
 * The fewest significant digits that read back to the same double, in plain
 * notation for moderate exponents ("300.0", "0.0006") and scientific
 * otherwise ("1.0e-08"); always with a '.', so that YAML 1.1 readers see a
 * float too.
 */
static void format_double(double v, char *buf, size_t len)
{
	char sci[40], tmp[48], *e;
	int prec, exp10;

	for (prec = 1; prec < 17; prec++) {
		snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
		if (strtod(sci, NULL) == v)
			break;
	}
	snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
	e = strchr(sci, 'e');
	exp10 = atoi(e + 1);
	if (exp10 >= -5 && exp10 < 16) {
		snprintf(tmp, sizeof tmp, "%.*f", prec - 1 - exp10 > 0 ? prec - 1 - exp10 : 0, v);
		snprintf(buf, len, "%s%s", tmp, strchr(tmp, '.') ? "" : ".0");
	} else if (strchr(sci, '.')) {
		snprintf(buf, len, "%s", sci);
	} else {
		snprintf(buf, len, "%.*s.0%s", (int)(e - sci), sci, e);
	}
}

static void put_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\x%02x", *p);
		} else if (p[0] == 0xc2 && p[1] == 0x85) {
			/* YAML counts U+0085 (NEL), U+2028 and U+2029 as line
			 * breaks even inside quotes, and folds NEL into a space:
			 * escaped, they read back as themselves. */
			fputs("\\N", f);
			p += 1;
		} else if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
			fputs(p[2] == 0xa8 ? "\\L" : "\\P", f);
			p += 2;
		} else {
			fputc(*p, f);
		}
	}
	fputc('"', f);
}

void config_put_value(FILE *f, const struct stork_config *c, const struct key *k)
{
	const void *p = config_field(c, k);
	char num[64];

	switch (k->type) {
	case K_STR:
	case K_NAME:
		if (k->flags & REDACT) {
			char shown[512];

			url_redact(*(char *const *)p ? *(char *const *)p : "", shown, sizeof shown);
			put_quoted(f, shown);
			break;
		}
		put_quoted(f, *(char *const *)p ? *(char *const *)p : "");
		break;
	case K_AUTO_INT:
		if (*(const int *)p == (k->flags & AUTO_NEG ? -1 : 0)) {
			fputs("auto", f);
			break;
		}
		/* fall through */
	case K_INT:
		fprintf(f, "%d", *(const int *)p);
		break;
	case K_U64:
		fprintf(f, "%" PRIu64, *(const uint64_t *)p);
		break;
	case K_DOUBLE:
		format_double(*(const double *)p, num, sizeof num);
		fputs(num, f);
		break;
	case K_BOOL:
		fputs(*(const bool *)p ? "true" : "false", f);
		break;
	case K_ENUM:
		for (int i = 0; k->names[i].name; i++)
			if (k->names[i].value == *(const int *)p)
				fputs(k->names[i].name, f);
		break;
	case K_GLOBS: {
		const struct stork_globs *g = p;

		fputc('[', f);
		for (size_t i = 0; i < g->n; i++) {
			char shown[4096];

			if (i)
				fputs(", ", f);
			if (k->flags & REDACT)
				url_public(g->v[i], shown, sizeof shown);
			put_quoted(f, k->flags & REDACT ? shown : g->v[i]);
		}
		fputc(']', f);
		break;
	}
	}
}

static int write_yaml(const struct stork_config *c, FILE *f, int comments)
{
	const char *section = "";
	size_t sl = 0;

	/* a program run's resolved file leaves out the engine's keys, which it refuses */
	bool program = comments && c->program.command.n;

	if (comments)
		fprintf(f, "# Resolved Stork configuration: every key%s, defaults filled in.\n"
			   "# See stork.yaml(5) for the meaning of each key.\n",
			program ? " a program run reads" : "");
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct key *k = &config_keys[i];
		const char *dot = strchr(k->path, '.');

		if (program && config_key_is_engine(k->path))
			continue;
		if ((size_t)(dot - k->path) != sl || strncmp(k->path, section, sl)) {
			section = k->path;
			sl = (size_t)(dot - k->path);
			fprintf(f, "%.*s:\n", (int)sl, section);
		}
		fprintf(f, "  %s: ", dot + 1);
		config_put_value(f, c, k);
		if (comments)
			fprintf(f, "  # %s", k->help);
		fputc('\n', f);
	}
	return ferror(f) ? -1 : 0;
}

int config_write_yaml(const struct stork_config *c, FILE *f)
{
	if (write_yaml(c, f, 1) < 0)
		return -1;
	return fflush(f) == 0 ? 0 : -1;
}

static char *to_yaml(const struct stork_config *c, int comments)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (write_yaml(c, f, comments) < 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *config_to_yaml(const struct stork_config *c)
{
	return to_yaml(c, 1);
}

/* ------------------------------------------------------- equality, hash */

bool config_equal(const struct stork_config *a, const struct stork_config *b)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct key *k = &config_keys[i];
		const void *pa = config_field(a, k), *pb = config_field(b, k);

		switch (k->type) {
		case K_STR:
		case K_NAME:
			if (strcmp(*(char *const *)pa, *(char *const *)pb))
				return false;
			break;
		case K_INT:
		case K_AUTO_INT:
		case K_ENUM:
			if (*(const int *)pa != *(const int *)pb)
				return false;
			break;
		case K_U64:
			if (*(const uint64_t *)pa != *(const uint64_t *)pb)
				return false;
			break;
		case K_DOUBLE:
			if (memcmp(pa, pb, sizeof(double)))
				return false;
			break;
		case K_BOOL:
			if (*(const bool *)pa != *(const bool *)pb)
				return false;
			break;
		case K_GLOBS: {
			const struct stork_globs *ga = pa, *gb = pb;

			if (ga->n != gb->n)
				return false;
			for (size_t j = 0; j < ga->n; j++)
				if (strcmp(ga->v[j], gb->v[j]))
					return false;
			break;
		}
		}
	}
	return true;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

uint64_t config_hash(const struct stork_config *c)
{
	char *text = to_yaml(c, 0);
	uint64_t h;

	if (!text)
		return 0;
	h = fnv1a(text, FNV_OFFSET);
	free(text);
	return h;
}

uint64_t config_model_hash(const struct stork_config *c)
{
	char text[512];
	int n;

	n = snprintf(text, sizeof text,
		     "layers=%d heads=%d channels=%d max_seq_len=%d vocab_size=%d padded_vocab_size=%d",
		     c->model.layers, c->model.heads, c->model.channels, c->model.max_seq_len,
		     c->model.vocab_size, c->model.padded_vocab_size);
	/* GPT-2's text stays what it was: its runs' hashes do not change */
	if (c->model.arch == STORK_ARCH_LLAMA)
		snprintf(text + n, sizeof text - (size_t)n,
			 " arch=llama kv_heads=%d intermediate_size=%d tie=%d eps=%g theta=%g "
			 "rope=%g,%g,%g,%d", c->model.kv_heads, c->model.intermediate_size,
			 c->model.tie_embeddings, c->model.rms_norm_eps, c->model.rope_theta,
			 c->model.rope_scaling_factor, c->model.rope_low_freq_factor,
			 c->model.rope_high_freq_factor, c->model.rope_original_max_positions);
	return fnv1a(text, FNV_OFFSET);
}

/* k's value in c as written in a configuration, into buf. */
static void value_text(const struct stork_config *c, const struct key *k, char *buf, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (f) {
		config_put_value(f, c, k);
		fclose(f);
	}
	snprintf(buf, len, "%s", text ? text : "?");
	free(text);
}

static bool skipped(const char *path, const char *const *skip)
{
	for (int i = 0; skip && skip[i]; i++)
		if (!strcmp(path, skip[i]))
			return true;
	return false;
}

int config_differences(const struct stork_config *was, const struct stork_config *now,
		       const char *const *skip, char *buf, size_t len)
{
	size_t used = 0;
	int n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct key *k = &config_keys[i];
		char a[256], b[256];

		if (skipped(k->path, skip))
			continue;
		value_text(was, k, a, sizeof a);
		value_text(now, k, b, sizeof b);
		if (!strcmp(a, b))
			continue;
		n++;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "\n  %s: %s -> %s", k->path, a,
						 b);
	}
	return n;
}
