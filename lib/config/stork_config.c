/*
 * lib/config/stork_config.c - see stork_config.h.
 *
 * Loading a configuration: every key is one row of the table config_keys
 * (config_keys.c); this file parses a file or an override against it,
 * sets the defaults and frees. Checks of the whole are config_validate.c's,
 * output, equality and hashes config_write.c's.
 *
 * A file is read with libyaml's document API: the tree keeps the start mark
 * of every node, which gives the line:column of each message. An override's
 * value is parsed as a YAML document of its own, so "train.lr=1e-3" and
 * "lr: 1e-3" go through the same checks.
 */
#include "config.h"
#include "lib/config/stork_config.h"
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
#include "lib/config/config_keys.h"

/* ---------------------------------------------------------------- helpers */

static int section_known(const char *s, size_t len)
{
	for (int i = 0; config_sections[i]; i++)
		if (strlen(config_sections[i]) == len && memcmp(config_sections[i], s, len) == 0)
			return 1;
	return 0;
}

/* "batch_size, seq_len, ..." : the keys of one section. */
static void section_keys(const char *section, char *buf, size_t len)
{
	size_t sl = strlen(section), used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < config_nkeys; i++) {
		if (strncmp(config_keys[i].path, section, sl) || config_keys[i].path[sl] != '.')
			continue;
		used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
				 used ? ", " : "", config_keys[i].path + sl + 1);
	}
}

static void section_list(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; config_sections[i]; i++)
		used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
				 i ? ", " : "", config_sections[i]);
}

/* What a key accepts, in words, for messages. */
static void expected(const struct key *k, char *buf, size_t len)
{
	size_t used;

	switch (k->type) {
	case K_STR:
		snprintf(buf, len, "%s", k->flags & EMPTY_OK ? "a string (may be empty)" : "a non-empty string");
		break;
	case K_NAME:
		snprintf(buf, len, "a non-empty name without '/'");
		break;
	case K_INT:
	case K_AUTO_INT:
		if (k->hi < BIG)
			snprintf(buf, len, "%san integer from %.0f to %.0f",
				 k->type == K_AUTO_INT ? "auto or " : "", k->lo, k->hi);
		else
			snprintf(buf, len, "%san integer >= %.0f",
				 k->type == K_AUTO_INT ? "auto or " : "", k->lo);
		break;
	case K_U64:
		snprintf(buf, len, "an integer from 0 to %" PRIu64, UINT64_MAX);
		break;
	case K_DOUBLE:
		if (k->hi < DBL_MAX)
			snprintf(buf, len, "a number in %c%g, %g%c", k->flags & LO_OPEN ? '(' : '[',
				 k->lo, k->hi, k->flags & HI_OPEN ? ')' : ']');
		else
			snprintf(buf, len, "a number %s %g", k->flags & LO_OPEN ? ">" : ">=", k->lo);
		break;
	case K_BOOL:
		snprintf(buf, len, "true or false");
		break;
	case K_ENUM:
		used = snprintf(buf, len, "one of ");
		for (int i = 0; k->names[i].name; i++)
			used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
					 i ? ", " : "", k->names[i].name);
		break;
	case K_GLOBS:
		if (k->names) {
			used = snprintf(buf, len, "a list of ");
			for (int i = 0; k->names[i].name; i++)
				used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
						 i ? ", " : "", k->names[i].name);
			break;
		}
		snprintf(buf, len, "a glob or a list of globs%s", k->flags & MIN1 ? " (at least one)" : "");
		break;
	}
}

/* ------------------------------------------------------- scalar checking */

/* A value to apply: either a libyaml node of doc, or a raw override string. */
struct value {
	yaml_document_t *doc;
	yaml_node_t *node;      /* NULL: null (empty) */
	const char *where;      /* "f.yaml:3:5" or "override 'k=v'" */
	const char *file;       /* file name for the marks of list items, or NULL */
};

static const char *scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

static int is_quoted(const yaml_node_t *n)
{
	return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
	       n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* YAML's null: an absent value, or a plain "~" / "null". */
static int is_null(const yaml_node_t *n)
{
	const char *s;

	if (!n)
		return 1;
	if (n->type != YAML_SCALAR_NODE || is_quoted(n))
		return 0;
	s = scalar(n);
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	if (is_null(n))
		return "nothing";
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	return "a string";
}

/* The error for a value that a key does not accept. */
static int bad_value(const struct key *k, const yaml_node_t *n, const char *where,
		     char *err, size_t errlen)
{
	char exp[256];

	expected(k, exp, sizeof exp);
	if (n && n->type == YAML_SCALAR_NODE && !is_null(n))
		return config_fail(err, errlen, "%s: %s: expected %s, got %s%s%s%s", where, k->path, exp,
			    is_quoted(n) ? "the quoted string \"" : "'", scalar(n),
			    is_quoted(n) ? "\"" : "'",
			    is_quoted(n) && k->type != K_STR && k->type != K_NAME ?
				    " (remove the quotes)" : "");
	return config_fail(err, errlen, "%s: %s: expected %s, got %s", where, k->path, exp, node_kind(n));
}

static int parse_int(const char *s, long long *out)
{
	char *end;
	const char *p = s + (*s == '-' || *s == '+');

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || *end ? -1 : 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	const char *p = s + (*s == '+');

	if (!*p)
		return -1;
	for (const char *q = p; *q; q++)
		if (*q < '0' || *q > '9')
			return -1;
	errno = 0;
	*out = strtoull(p, &end, 10);
	return errno || *end ? -1 : 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	int digits = 0;

	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits = 1;
		else if (!strchr("+-.eE", *p))
			return -1;
	}
	if (!digits)
		return -1;
	errno = 0;
	*out = strtod(s, &end);
	return *end || errno == ERANGE || !isfinite(*out) ? -1 : 0;
}

static int in_range(const struct key *k, double v)
{
	if (k->flags & LO_OPEN ? v <= k->lo : v < k->lo)
		return 0;
	if (k->flags & HI_OPEN ? v >= k->hi : v > k->hi)
		return 0;
	return 1;
}

static int set_string(char **dst, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -1;
	free(*dst);
	*dst = copy;
	return 0;
}

static void globs_free(struct stork_globs *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	free(g->v);
	g->v = NULL;
	g->n = 0;
}

static int globs_push(struct stork_globs *g, const char *s)
{
	char **v = realloc(g->v, (g->n + 1) * sizeof *v);

	if (!v)
		return -1;
	g->v = v;
	if (!(v[g->n] = strdup(s)))
		return -1;
	g->n++;
	return 0;
}

static int apply_globs(const struct key *k, struct stork_globs *dst, const struct value *val,
		       char *err, size_t errlen)
{
	struct stork_globs g = { NULL, 0 };
	yaml_node_t *n = val->node;

	if (is_null(n) && !(k->flags & MIN1))
		goto done;
	if (n && n->type == YAML_SCALAR_NODE && !is_null(n)) {
		if (!*scalar(n))
			return bad_value(k, n, val->where, err, errlen);
		if (globs_push(&g, scalar(n)) < 0)
			goto oom;
		goto done;
	}
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return bad_value(k, n, val->where, err, errlen);
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = yaml_document_get_node(val->doc, *it);

		if (item->type != YAML_SCALAR_NODE || is_null(item) || !*scalar(item)) {
			char w[600];

			if (val->file)
				snprintf(w, sizeof w, "%s:%zu:%zu", val->file, item->start_mark.line + 1,
					 item->start_mark.column + 1);
			else
				snprintf(w, sizeof w, "%s", val->where);
			globs_free(&g);
			return config_fail(err, errlen, "%s: %s: expected a glob (a non-empty string) in the list, got %s",
				    w, k->path, item->type == YAML_SCALAR_NODE && !is_null(item) ?
				    "an empty string" : node_kind(item));
		}
		if (globs_push(&g, scalar(item)) < 0)
			goto oom;
	}
	if (g.n == 0 && (k->flags & MIN1))
		return config_fail(err, errlen, "%s: %s: expected at least one glob, got an empty list",
			    val->where, k->path);
done:
	/* a list of names (notify.events): each one known */
	for (size_t i = 0; k->names && i < g.n; i++) {
		int known = 0;
		char what[256];

		for (int j = 0; k->names[j].name; j++)
			known |= !strcmp(g.v[i], k->names[j].name);
		if (!known) {
			expected(k, what, sizeof what);
			config_fail(err, errlen, "%s: %s: unknown name '%s': expected %s", val->where, k->path,
			     g.v[i], what);
			globs_free(&g);
			return -1;
		}
	}
	globs_free(dst);
	*dst = g;
	return 0;
oom:
	globs_free(&g);
	return config_fail(err, errlen, "%s: %s: out of memory", val->where, k->path);
}

/* Check one value against key k and store it in c. */
static int apply_value(struct stork_config *c, const struct key *k, const struct value *val,
		       char *err, size_t errlen)
{
	yaml_node_t *n = val->node;
	void *p = config_field(c, k);
	const char *s;
	long long ll;
	double d;

	if (k->type == K_GLOBS)
		return apply_globs(k, p, val, err, errlen);
	if (k->type == K_STR && (k->flags & EMPTY_OK) && is_null(n))
		return set_string(p, "") < 0 ? config_fail(err, errlen, "out of memory") : 0;
	if (!n || n->type != YAML_SCALAR_NODE || is_null(n))
		return bad_value(k, n, val->where, err, errlen);
	s = scalar(n);
	switch (k->type) {
	case K_NAME:
		if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
			return bad_value(k, n, val->where, err, errlen);
		/* fall through */
	case K_STR:
		if (!*s && !(k->flags & EMPTY_OK))
			return bad_value(k, n, val->where, err, errlen);
		return set_string(p, s) < 0 ? config_fail(err, errlen, "out of memory") : 0;
	case K_AUTO_INT:
		if (!is_quoted(n) && !strcmp(s, "auto")) {
			*(int *)p = k->flags & AUTO_NEG ? -1 : 0;
			return 0;
		}
		/* fall through */
	case K_INT:
		if (is_quoted(n) || parse_int(s, &ll) < 0 || ll < k->lo || ll > k->hi)
			return bad_value(k, n, val->where, err, errlen);
		*(int *)p = (int)ll;
		return 0;
	case K_U64:
		if (is_quoted(n) || parse_u64(s, p) < 0)
			return bad_value(k, n, val->where, err, errlen);
		return 0;
	case K_DOUBLE:
		if (is_quoted(n) || parse_double(s, &d) < 0 || !in_range(k, d))
			return bad_value(k, n, val->where, err, errlen);
		*(double *)p = d;
		return 0;
	case K_BOOL:
		if (!is_quoted(n) && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")))
			*(bool *)p = true;
		else if (!is_quoted(n) && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")))
			*(bool *)p = false;
		else
			return bad_value(k, n, val->where, err, errlen);
		return 0;
	case K_ENUM:
		for (int i = 0; k->names[i].name; i++)
			if (!strcmp(s, k->names[i].name)) {
				*(int *)p = k->names[i].value;
				return 0;
			}
		return bad_value(k, n, val->where, err, errlen);
	case K_GLOBS:
		break;
	}
	return bad_value(k, n, val->where, err, errlen);
}

static void set_origin(struct stork_config *c, size_t idx, const char *where)
{
	if (!c->origin && !(c->origin = calloc(config_nkeys, sizeof *c->origin)))
		return;
	free(c->origin[idx]);
	c->origin[idx] = where ? strdup(where) : NULL;
}

size_t config_key_count(void)
{
	return config_nkeys;
}

const char *config_key_path(size_t i)
{
	return i < config_nkeys ? config_keys[i].path : NULL;
}

const char *config_origin(const struct stork_config *c, const char *path)
{
	int i = config_key_index(path, strlen(path));

	return c->origin && i >= 0 && c->origin[i] ? c->origin[i] : "default";
}

bool config_key_is_engine(const char *path)
{
	static const char *const engine[] = { "model.", "data.", "train.", "checkpoint.",
					      "parallel.tensor", "parallel.pipeline",
					      "parallel.zero", "parallel.overlap", NULL };

	for (int e = 0; engine[e]; e++)
		if (!strncmp(path, engine[e], strlen(engine[e])))
			return true;
	return false;
}

int config_engine_keys_set(const struct stork_config *c, char *buf, size_t len)
{
	size_t used = 0;
	int n = 0;

	buf[0] = '\0';
	for (size_t i = 0; c->origin && i < config_nkeys; i++) {
		if (!config_key_is_engine(config_keys[i].path) || !c->origin[i])
			continue;
		n++;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s (%s)", used ? ", " : "",
						 config_keys[i].path, c->origin[i]);
	}
	return n;
}

/* ------------------------------------------------------ parsing a value */

static int yaml_error(const yaml_parser_t *y, const char *name, char *err, size_t errlen)
{
	const char *problem = y->problem ? y->problem : "unknown error";

	if (y->context)
		return config_fail(err, errlen, "%s:%zu:%zu: malformed YAML: %s (%s at line %zu, column %zu)",
			    name, y->problem_mark.line + 1, y->problem_mark.column + 1, problem,
			    y->context, y->context_mark.line + 1, y->context_mark.column + 1);
	return config_fail(err, errlen, "%s:%zu:%zu: malformed YAML: %s", name,
		    y->problem_mark.line + 1, y->problem_mark.column + 1, problem);
}

/*
 * Apply one override value. Strings and globs that do not start like a YAML
 * flow value ([, ", ') are taken literally, so "data.train=*.bin" works;
 * everything else is parsed as a one-line YAML document.
 */
static int apply_text(struct stork_config *c, size_t idx, const char *text, const char *where,
		      char *err, size_t errlen)
{
	const struct key *k = &config_keys[idx];
	yaml_parser_t y;
	yaml_document_t doc;
	struct value val = { &doc, NULL, where, NULL };
	int literal = (k->type == K_STR || k->type == K_NAME || k->type == K_GLOBS) &&
		      *text && !strchr("[\"'", *text);
	int rc;

	if (!yaml_parser_initialize(&y))
		return config_fail(err, errlen, "%s: out of memory", where);
	if (literal) {
		yaml_char_t *s = (yaml_char_t *)text;

		memset(&doc, 0, sizeof doc);
		if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1))
			goto oom;
		rc = yaml_document_add_scalar(&doc, NULL, s, (int)strlen(text),
					      YAML_DOUBLE_QUOTED_SCALAR_STYLE);
		if (!rc)
			goto oom_doc;
		val.node = yaml_document_get_node(&doc, rc);
	} else {
		yaml_parser_set_input_string(&y, (const unsigned char *)text, strlen(text));
		if (!yaml_parser_load(&y, &doc)) {
			char msg[512];

			yaml_error(&y, "value", msg, sizeof msg);
			yaml_parser_delete(&y);
			return config_fail(err, errlen, "%s: %s: %s", where, k->path, msg);
		}
		val.node = yaml_document_get_root_node(&doc);
	}
	rc = apply_value(c, k, &val, err, errlen);
	yaml_document_delete(&doc);
	yaml_parser_delete(&y);
	return rc;
oom_doc:
	yaml_document_delete(&doc);
oom:
	yaml_parser_delete(&y);
	return config_fail(err, errlen, "%s: out of memory", where);
}

/* ------------------------------------------------------- parsing a file */

struct file_ctx {
	struct stork_config *c;
	yaml_document_t *doc;
	const char *name;
	char *err;
	size_t errlen;
};

static void mark_str(const struct file_ctx *f, yaml_mark_t m, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%zu:%zu", f->name, m.line + 1, m.column + 1);
}

/*
 * The keys of a mapping must be plain scalars, each at most once. On error,
 * describe it with section (NULL at top level) for the path.
 */
static int check_keys(const struct file_ctx *f, yaml_node_t *map, const char *section)
{
	char w[600];

	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);

		mark_str(f, k->start_mark, w, sizeof w);
		if (k->type != YAML_SCALAR_NODE)
			return config_fail(f->err, f->errlen, "%s: %s%sexpected a key name, got %s", w,
				    section ? section : "", section ? ": " : "", node_kind(k));
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *prev = yaml_document_get_node(f->doc, q->key);
			char first[600];

			if (prev->type != YAML_SCALAR_NODE || strcmp(scalar(prev), scalar(k)))
				continue;
			mark_str(f, prev->start_mark, first, sizeof first);
			return config_fail(f->err, f->errlen, "%s: %s%s%s: duplicate key, first set at %s; keep one",
				    w, section ? section : "", section ? "." : "", scalar(k), first);
		}
	}
	return 0;
}

static int load_section(const struct file_ctx *f, const char *section, yaml_node_t *map)
{
	char w[600], path[256], known[512];

	if (is_null(map))
		return 0;
	if (map->type != YAML_MAPPING_NODE) {
		mark_str(f, map->start_mark, w, sizeof w);
		section_keys(section, known, sizeof known);
		return config_fail(f->err, f->errlen, "%s: %s: expected a mapping of keys (%s), got %s",
			    w, section, known, node_kind(map));
	}
	if (check_keys(f, map, section) < 0)
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(f->doc, p->value);
		struct value val = { f->doc, v, w, f->name };
		int idx;

		snprintf(path, sizeof path, "%s.%s", section, scalar(k));
		idx = config_key_index(path, strlen(path));
		if (idx < 0) {
			mark_str(f, k->start_mark, w, sizeof w);
			section_keys(section, known, sizeof known);
			return config_fail(f->err, f->errlen, "%s: %s: unknown key; the keys of %s are: %s",
				    w, path, section, known);
		}
		/* An empty value has no useful mark of its own: point at the key. */
		mark_str(f, is_null(v) && !*scalar(v) ? k->start_mark : v->start_mark, w, sizeof w);
		if (apply_value(f->c, &config_keys[idx], &val, f->err, f->errlen) < 0)
			return -1;
		set_origin(f->c, (size_t)idx, w);
	}
	return 0;
}

static int load_root(const struct file_ctx *f, yaml_node_t *root)
{
	char w[600], list[256];

	section_list(list, sizeof list);
	if (is_null(root))
		return 0;
	if (root->type != YAML_MAPPING_NODE) {
		mark_str(f, root->start_mark, w, sizeof w);
		return config_fail(f->err, f->errlen, "%s: expected a mapping of sections (%s), got %s",
			    w, list, node_kind(root));
	}
	if (check_keys(f, root, NULL) < 0)
		return -1;
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(f->doc, p->key);

		if (!section_known(scalar(k), strlen(scalar(k)))) {
			mark_str(f, k->start_mark, w, sizeof w);
			return config_fail(f->err, f->errlen, "%s: %s: unknown section; the sections are: %s",
				    w, scalar(k), list);
		}
		if (load_section(f, scalar(k), yaml_document_get_node(f->doc, p->value)) < 0)
			return -1;
	}
	return 0;
}

int config_load_string(struct stork_config *c, const char *text, const char *name,
		       char *err, size_t errlen)
{
	yaml_parser_t y;
	yaml_document_t doc, extra;
	struct file_ctx f = { c, &doc, name, err, errlen };
	yaml_node_t *more;
	int rc = -1;

	config_init(c);
	if (!yaml_parser_initialize(&y))
		return config_fail(err, errlen, "%s: out of memory", name);
	yaml_parser_set_input_string(&y, (const unsigned char *)text, strlen(text));
	if (!yaml_parser_load(&y, &doc)) {
		yaml_error(&y, name, err, errlen);
		goto out_parser;
	}
	if (load_root(&f, yaml_document_get_root_node(&doc)) < 0)
		goto out_doc;
	if (!yaml_parser_load(&y, &extra)) {
		yaml_error(&y, name, err, errlen);
		goto out_doc;
	}
	more = yaml_document_get_root_node(&extra);
	if (more)
		config_fail(err, errlen, "%s:%zu:%zu: a second YAML document; a configuration is one document",
		     name, more->start_mark.line + 1, more->start_mark.column + 1);
	else
		rc = 0;
	yaml_document_delete(&extra);
out_doc:
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&y);
	return rc;
}

int config_load(struct stork_config *c, const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int rc;

	if (!fp) {
		int e = errno;

		config_init(c);
		return config_fail(err, errlen, "%s: cannot open the configuration: %s", path, strerror(e));
	}
	do {
		if (cap - len < 4096) {
			char *t = realloc(text, cap = cap * 2 + 8192);

			if (!t) {
				free(text);
				fclose(fp);
				config_init(c);
				return config_fail(err, errlen, "%s: out of memory", path);
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len - 1, fp);
		len += n;
	} while (n > 0);
	if (ferror(fp)) {
		int e = errno;

		free(text);
		fclose(fp);
		config_init(c);
		return config_fail(err, errlen, "%s: cannot read the configuration: %s", path, strerror(e));
	}
	fclose(fp);
	text[len] = '\0';
	if (strlen(text) != len) {
		free(text);
		config_init(c);
		return config_fail(err, errlen, "%s: a NUL byte in the file; is it a YAML text file?", path);
	}
	rc = config_load_string(c, text, path, err, errlen);
	free(text);
	return rc;
}

/* ------------------------------------------------------------- overrides */

int config_set(struct stork_config *c, const char *assignment, char *err, size_t errlen)
{
	const char *eq = strchr(assignment, '=');
	char where[600], known[512];
	int idx;

	snprintf(where, sizeof where, "override '%s'", assignment);
	if (!eq || eq == assignment)
		return config_fail(err, errlen, "%s: expected SECTION.KEY=VALUE, e.g. train.steps=50", where);
	idx = config_key_index(assignment, (size_t)(eq - assignment));
	if (idx < 0) {
		const char *dot = memchr(assignment, '.', (size_t)(eq - assignment));
		char section[64];

		if (dot && section_known(assignment, (size_t)(dot - assignment))) {
			snprintf(section, sizeof section, "%.*s", (int)(dot - assignment), assignment);
			section_keys(section, known, sizeof known);
			return config_fail(err, errlen, "%s: %.*s: unknown key; the keys of %s are: %s", where,
				    (int)(eq - assignment), assignment, section, known);
		}
		section_list(known, sizeof known);
		return config_fail(err, errlen, "%s: %.*s: unknown key; keys are SECTION.KEY with SECTION one of: %s",
			    where, (int)(eq - assignment), assignment, known);
	}
	if (apply_text(c, (size_t)idx, eq + 1, where, err, errlen) < 0)
		return -1;
	set_origin(c, (size_t)idx, where);
	return 0;
}

/* ------------------------------------------------------------ defaults */

static void clear(struct stork_config *c)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		void *p = config_field(c, &config_keys[i]);

		if (config_keys[i].type == K_STR || config_keys[i].type == K_NAME) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (config_keys[i].type == K_GLOBS) {
			globs_free(p);
		}
	}
	if (c->origin)
		for (size_t i = 0; i < config_nkeys; i++)
			free(c->origin[i]);
	free(c->origin);
	c->origin = NULL;
}

void config_init(struct stork_config *c)
{
	char err[512];

	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < config_nkeys; i++) {
		if (apply_text(c, i, config_keys[i].dflt, "default", err, sizeof err) < 0) {
			fprintf(stderr, "stork: bad built-in default: %s\n", err);
			abort();
		}
	}
}

void config_free(struct stork_config *c)
{
	clear(c);
}
