/*
 * launcher/run/stage.c - see stage.h.
 */
#include "config.h"
#include "launcher/run/stage.h"
#include "launcher/sha256_file.h"

#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/io/private_dir.h"
#include "lib/run/stage_path.h"
#include "lib/io/atomic_file.h"
#include "lib/formats/token_shard.h"
#include "lib/url.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STAGE_TRIES 6              /* per shard: then the run stops */
#define STAGE_PROGRESS_SECONDS 5.0
#define STAGE_MAX_REDIRECTS 8
/* Slower than this over the window is a stalled transfer (tried again, up
 * to STAGE_TRIES): no real link stays under 16 KB/s for a minute. */
#define STAGE_LOW_SPEED_BYTES 16384L
#define STAGE_LOW_SPEED_SECONDS 60L

struct shard {
	const char *url;
	char shown[1024];              /* url_public(): for messages */
	char path[4096], part[4200];
	char sha256[65];               /* expected, "" when the manifest has none */
	FILE *f;                       /* the .part file while a transfer runs */
	CURL *easy;                    /* its transfer */
	curl_off_t have;               /* bytes in .part */
	curl_off_t size;               /* the whole shard when known, else 0 */
	curl_off_t limit;              /* the most it may have: data.max_stage_bytes, then
					* what its header promises; 0 = no limit */
	int promised;                  /* the limit is its header's promise */
	int header_read;               /* its header was judged: not read again */
	char refused[256];             /* why its bytes were refused, "" = they were not */
	int tries;
	double retry_at;               /* clock_monotonic() of the next try; 0 = now */
	int running, done;
	char curl_err[CURL_ERROR_SIZE];
};

struct stage {
	const struct stork_config *cfg;
	char dir[4096];
	struct shard *shards;
	int n;
	CURLM *multi;
	char token[4096];
	char err[1024];
	int failed;                    /* an exit code, once a shard cannot be staged */
	double stop_at;                /* clock_monotonic() when staging must stop; 0: never */
	time_t job_end;                /* the job's end it was derived from */
};

/* ------------------------------------------------------------ the shards */

static int add_url(struct stage *s, const char *url)
{
	struct shard *sh;

	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->shards[i].url, url))
			return 0;
	sh = realloc(s->shards, (size_t)(s->n + 1) * sizeof *sh);
	if (!sh)
		return -1;
	s->shards = sh;
	sh = &s->shards[s->n];
	memset(sh, 0, sizeof *sh);
	sh->url = url;
	url_public(url, sh->shown, sizeof sh->shown);
	if (stage_local_path(s->dir, url, sh->path, sizeof sh->path) < 0 ||
	    snprintf(sh->part, sizeof sh->part, "%s.part", sh->path) >= (int)sizeof sh->part)
		return -1;
	s->n++;
	return 0;
}

/* The last path element of a URL, for the manifest ("x_train.bin"). */
static void url_basename(const char *url, char *out, size_t len)
{
	size_t end = strcspn(url, "?#");
	const char *slash = url;

	for (size_t i = 0; i < end; i++)
		if (url[i] == '/')
			slash = url + i + 1;
	snprintf(out, len, "%.*s", (int)(url + end - slash), slash);
}

/*
 * data.sha256: lines as sha256sum prints them, "HEX  NAME" (or "HEX *NAME"),
 * NAME a shard's file name or its whole URL.
 */
static int read_manifest(struct stage *s)
{
	const char *path = s->cfg->data.sha256;
	char line[8192];
	FILE *f;

	if (!path || !*path)
		return 0;
	if (!(f = fopen(path, "r"))) {
		msg_format(s->err, sizeof s->err, "data.sha256: cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char hex[65], *name = line + 64;

		if (strspn(line, "0123456789abcdefABCDEF") != 64 || (*name != ' ' && *name != '\t'))
			continue;
		memcpy(hex, line, 64);
		hex[64] = '\0';
		name += strspn(name, " \t*");
		name[strcspn(name, "\r\n")] = '\0';
		for (int i = 0; i < s->n; i++) {
			char base[1024];

			url_basename(s->shards[i].url, base, sizeof base);
			if (!strcmp(name, base) || !strcmp(name, s->shards[i].url))
				for (int k = 0; k < 65; k++)
					s->shards[i].sha256[k] = (char)(k < 64 ? (hex[k] | 0x20) : '\0');
		}
	}
	fclose(f);
	return 0;
}

/* ---------------------------------------------------------- verification */


/*
 * A staged file is usable when it is an llm.c token shard whose size its
 * header accounts for (lib/formats/token_shard.c, the loader's own check), and
 * matches the manifest when there is one. 0, or -1 with the reason in why.
 */
static int verify(const struct shard *sh, const char *path, char *why, size_t len)
{
	struct token_shard ts;
	char got[65];

	if (token_shard_check(path, &ts, why, len))
		return -1;
	if (!sh->sha256[0])
		return 0;
	if (file_sha256(path, got) < 0) {
		snprintf(why, len, "cannot hash %s", path);
		return -1;
	}
	if (strcmp(got, sh->sha256)) {
		snprintf(why, len, "its sha256 is %s, data.sha256 says %s", got, sh->sha256);
		return -1;
	}
	return 0;
}

/*
 * What staging recorded of a shard it moved into place: PATH.sha256, the
 * SHA-256 of the bytes it downloaded. A staged file is used again only
 * when it is a regular file of ours (no link) whose hash is that record's:
 * a file that changed or appeared there since is staged anew.
 */
static void record_path(const struct shard *sh, char *buf, size_t len)
{
	snprintf(buf, len, "%s.sha256", sh->path);
}

static int record_staged(const struct shard *sh, char *why, size_t len)
{
	char rec[4200], hex[65], line[80];

	record_path(sh, rec, sizeof rec);
	if (file_sha256(sh->path, hex) < 0) {
		msg_format(why, len, "cannot hash %s", sh->path);
		return -1;
	}
	snprintf(line, sizeof line, "%s\n", hex);
	return atomic_write_file(rec, line, strlen(line), why, len);
}

static int matches_record(const struct shard *sh, char *why, size_t len)
{
	char rec[4200], want[80] = "", got[65];
	struct stat st;
	FILE *f;

	record_path(sh, rec, sizeof rec);
	if (lstat(sh->path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(why, len, "it is not a regular file of ours");
		return -1;
	}
	if (!(f = fopen(rec, "re"))) {
		snprintf(why, len, "staging left no record of its hash");
		return -1;
	}
	if (!fgets(want, sizeof want, f))
		want[0] = '\0';
	fclose(f);
	want[strcspn(want, "\n")] = '\0';
	if (file_sha256(sh->path, got) < 0 || strcmp(got, want)) {
		snprintf(why, len, "its sha256 is not the one recorded when it was staged");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ transfers */

/*
 * Once the shard's first header ints are in the file, the size they promise
 * lowers its limit; bytes that are not a token shard's are refused at once.
 * 0, or -1 with sh->refused saying why.
 */
static int hold_to_header(struct shard *sh)
{
	int32_t h[3];
	uint64_t promised;

	if (sh->header_read || sh->have < (curl_off_t)sizeof h || fflush(sh->f) == EOF ||
	    pread(fileno(sh->f), h, sizeof h, 0) != (ssize_t)sizeof h)
		return 0;
	sh->header_read = 1;
	if (token_shard_promise(h, &promised) < 0) {
		snprintf(sh->refused, sizeof sh->refused,
			 "its first bytes are not an llm.c token shard's header");
		return -1;
	}
	if (!sh->limit || (uint64_t)sh->limit > promised) {
		sh->limit = (curl_off_t)promised;
		sh->promised = 1;
	}
	return 0;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct shard *sh = arg;
	size_t n = size * nmemb;

	if (!sh->size) {
		/* the whole shard: what this answer brings and what was there */
		curl_off_t rest = 0;

		if (curl_easy_getinfo(sh->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &rest) == CURLE_OK &&
		    rest > 0)
			sh->size = sh->have + rest;
	}
	if (sh->limit && sh->have + (curl_off_t)n > sh->limit) {
		snprintf(sh->refused, sizeof sh->refused, "more than the %lld bytes %s", (long long)sh->limit,
			 sh->promised ? "its header promises" : "of data.max_stage_bytes");
		return 0; /* CURLE_WRITE_ERROR */
	}
	if (fwrite(p, 1, n, sh->f) != n)
		return 0; /* CURLE_WRITE_ERROR: a full stage directory */
	sh->have += (curl_off_t)n;
	return hold_to_header(sh) < 0 ? 0 : n;
}

/*
 * The partly downloaded file, for appending: never through a symbolic link
 * (O_NOFOLLOW), and only a regular file of ours. NULL with errno set.
 */
static FILE *open_part(const char *path)
{
	/* read too: the header already in it bounds the rest (hold_to_header) */
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	FILE *f;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		errno = EPERM;
		return NULL;
	}
	if (!(f = fdopen(fd, "ab")))
		close(fd);
	return f;
}

static int start(struct stage *s, struct shard *sh)
{
	CURL *c = curl_easy_init();
	/* test builds shorten the stall window, so a trickle test ends in seconds */
	double stall_window = fault_seconds("STORK_FAULT_STAGE_LOW_SPEED_S");
	struct stat st;

	if (!c || !(sh->f = open_part(sh->part))) {
		msg_format(s->err, sizeof s->err, "cannot stage %s into %s: %s", sh->shown, sh->part,
			   c ? strerror(errno) : "libcurl cannot start");
		if (c)
			curl_easy_cleanup(c);
		return -1;
	}
	sh->have = fstat(fileno(sh->f), &st) == 0 ? st.st_size : 0;
	sh->size = 0;
	sh->limit = (curl_off_t)s->cfg->data.max_stage_bytes;
	sh->promised = sh->header_read = 0;
	sh->refused[0] = '\0';
	if (hold_to_header(sh) < 0) { /* a kept part that is not a shard: start over */
		if (ftruncate(fileno(sh->f), 0) < 0) {
			msg_format(s->err, sizeof s->err, "cannot stage %s into %s: %s", sh->shown,
				   sh->part, strerror(errno));
			curl_easy_cleanup(c);
			return -1;
		}
		sh->have = 0;
		sh->limit = (curl_off_t)s->cfg->data.max_stage_bytes;
		sh->header_read = 0;
		sh->refused[0] = '\0';
	}
	sh->easy = c;
	sh->curl_err[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, sh->url);
	curl_easy_setopt(c, CURLOPT_PRIVATE, sh);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, sh);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, sh->curl_err);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)STAGE_MAX_REDIRECTS);
	if (sh->limit) /* an answer that says it is larger is refused before its body */
		curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, sh->limit);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a transfer that stalls (or trickles) for a minute is a connection error */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, STAGE_LOW_SPEED_BYTES);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_window > 0 ? (long)stall_window :
								       STAGE_LOW_SPEED_SECONDS);
	if (sh->have > 0)
		curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, sh->have);
	if (s->cfg->data.ca_file[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, s->cfg->data.ca_file);
	curl_easy_setopt(c, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
	if (s->cfg->data.netrc[0])
		curl_easy_setopt(c, CURLOPT_NETRC_FILE, s->cfg->data.netrc);
	if (s->token[0]) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, s->token);
	}
	sh->tries++;
	if (curl_multi_add_handle(s->multi, c) != CURLM_OK) {
		msg_format(s->err, sizeof s->err, "cannot stage %s: libcurl refused the transfer", sh->shown);
		/* not running: the cleanup at the end must not free it again */
		sh->easy = NULL;
		curl_easy_cleanup(c);
		return -1;
	}
	sh->running = 1;
	return 0;
}

/* Whether a failed transfer may succeed when tried again. */
static int transient(CURLcode rc, long status)
{
	if (rc == CURLE_HTTP_RETURNED_ERROR)
		return status >= 500 || status == 408 || status == 429;
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
	       rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING || rc == CURLE_SSL_CONNECT_ERROR;
}

/* Move a verified .part into place; the directory entry made durable. */
static int publish(struct stage *s, struct shard *sh)
{
	char why[512];
	int dfd;

	if (verify(sh, sh->part, why, sizeof why) < 0) {
		unlink(sh->part);
		msg_format(s->err, sizeof s->err, "data shard %s: %s", sh->shown, why);
		return -1;
	}
	if (rename(sh->part, sh->path) < 0) {
		msg_format(s->err, sizeof s->err, "cannot move %s into place: %s", sh->part, strerror(errno));
		return -1;
	}
	if (record_staged(sh, why, sizeof why) < 0)
		stork_warn("%s: %s: it will be staged again next time", sh->shown, why);
	if ((dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	sh->done = 1;
	stork_info("staged %s (%lld bytes, %d tr%s)", sh->shown, (long long)sh->have, sh->tries,
		   sh->tries == 1 ? "y" : "ies");
	return 0;
}

static void finished(struct stage *s, CURLMsg *m)
{
	CURL *c = m->easy_handle;
	CURLcode rc = m->data.result;
	struct shard *sh = NULL;
	long status = 0;
	int synced;

	curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&sh);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_multi_remove_handle(s->multi, c);
	curl_easy_cleanup(c);
	sh->running = 0;
	synced = fflush(sh->f) == 0 && fsync(fileno(sh->f)) == 0;
	fclose(sh->f);
	sh->f = NULL;
	if (rc == CURLE_OK && !synced)
		rc = CURLE_WRITE_ERROR;
	if (sh->refused[0] || rc == CURLE_FILESIZE_EXCEEDED) {
		/* a hostile or broken server: nothing of it is kept, nothing tried again */
		unlink(sh->part);
		msg_format(s->err, sizeof s->err, "data shard %s: refused: %s", sh->shown,
			   sh->refused[0] ? sh->refused : "its answer is larger than data.max_stage_bytes");
		s->failed = STORK_EXIT_DATA;
		return;
	}
	if (rc == CURLE_OK) {
		if (publish(s, sh) < 0)
			s->failed = STORK_EXIT_DATA;
		return;
	}
	/* A server that cannot serve the rest (416, or no ranges at all) is
	 * asked for the whole file again. */
	if ((rc == CURLE_HTTP_RETURNED_ERROR && status == 416) || rc == CURLE_RANGE_ERROR) {
		if (truncate(sh->part, 0) < 0)
			unlink(sh->part);
		sh->have = 0;
		rc = CURLE_PARTIAL_FILE;
	}
	if (transient(rc, status) && sh->tries < STAGE_TRIES) {
		double wait = (double)(1 << (sh->tries - 1)); /* 1, 2, 4, 8, 16 s */

		stork_warn("staging %s: %s; trying again in %.0f s (%lld bytes kept)", sh->shown,
			   rc == CURLE_HTTP_RETURNED_ERROR ? "the server failed" : curl_easy_strerror(rc),
			   wait, (long long)sh->have);
		sh->retry_at = clock_monotonic() + wait;
		return;
	}
	unlink(sh->part); /* a shard that cannot be staged leaves none of its bytes */
	if (rc == CURLE_HTTP_RETURNED_ERROR)
		msg_format(s->err, sizeof s->err, "data shard %s: HTTP status %ld%s", sh->shown, status,
			   sh->tries > 1 ? " (after retries)" : "");
	else {
		/* libcurl's text may quote the URL, query and all */
		char shown[CURL_ERROR_SIZE + 64];

		url_public_text(sh->curl_err, shown, sizeof shown);
		msg_format(s->err, sizeof s->err, "data shard %s: %s%s%s", sh->shown,
			   curl_easy_strerror(rc), shown[0] ? ": " : "", shown);
	}
	s->failed = STORK_EXIT_DATA;
}

/*
 * Every few seconds: shards done, bytes, the rate since staging began and
 * the time left at that rate (of the sizes known so far: a shard not yet
 * started counts once its answer gives its length).
 */
static void progress(const struct stage *s, double t0, long long had)
{
	long long have = 0, total = 0;
	int done = 0, unknown = 0;
	double secs = clock_monotonic() - t0, rate;

	for (int i = 0; i < s->n; i++) {
		const struct shard *sh = &s->shards[i];

		have += sh->have;
		done += sh->done;
		total += sh->size > 0 ? sh->size : sh->have;
		unknown += !sh->done && sh->size <= 0;
	}
	rate = secs > 0 ? (double)(have - had) / secs : 0;
	stork_info("staging: %d of %d shards, %.1f of %.1f MB%s, %.1f MB/s, eta %.0f s%s", done, s->n,
		   have / 1e6, total / 1e6, unknown ? " known" : "", rate / 1e6,
		   rate > 0 ? (double)(total - have) / rate : 0, unknown ? " and more" : "");
}

/* Staging has run into the job's end: stop, keeping every .part file. */
static int out_of_time(struct stage *s)
{
	long long have = 0, total = 0;
	char when[64];
	struct tm tm;

	for (int i = 0; i < s->n; i++) {
		have += s->shards[i].have;
		total += s->shards[i].size ? s->shards[i].size : s->shards[i].have;
	}
	localtime_r(&s->job_end, &tm);
	strftime(when, sizeof when, "%H:%M:%S", &tm);
	msg_format(s->err, sizeof s->err, "staging stopped: the job ends at %s, and training needs "
		   "the last %d s and preempt.deadline_lead (%.0f s); %lld of %lld byte(s) staged so "
		   "far are kept in %s for the next attempt to go on from; stage the data before the "
		   "job, or give it more time", when, STAGE_END_RESERVE_S,
		   s->cfg->preempt.deadline_lead, have, total, s->dir);
	return STORK_EXIT_DATA;
}

static int run_transfers(struct stage *s)
{
	double t0 = clock_monotonic(), shown = t0;
	long long had = 0; /* bytes there before this staging (reused, resumed) */
	int active;

	for (int i = 0; i < s->n; i++)
		had += s->shards[i].done ? s->shards[i].have : 0;

	for (;;) {
		int running = 0, pending = 0, msgs;
		double now = clock_monotonic();
		CURLMsg *m;

		for (int i = 0; i < s->n; i++)
			running += s->shards[i].running;
		for (int i = 0; i < s->n && !s->failed; i++) {
			struct shard *sh = &s->shards[i];

			if (sh->done || sh->running)
				continue;
			pending++;
			if (running < s->cfg->data.downloads && sh->retry_at <= now) {
				if (start(s, sh) < 0)
					return STORK_EXIT_DATA;
				running++;
			}
		}
		if (s->failed || (!running && !pending))
			break;
		if (curl_multi_perform(s->multi, &active) != CURLM_OK ||
		    curl_multi_poll(s->multi, NULL, 0, 200, NULL) != CURLM_OK) {
			msg_format(s->err, sizeof s->err, "staging: libcurl failed");
			return STORK_EXIT_DATA;
		}
		while ((m = curl_multi_info_read(s->multi, &msgs)))
			if (m->msg == CURLMSG_DONE)
				finished(s, m);
		if (s->stop_at && clock_monotonic() >= s->stop_at)
			return out_of_time(s);
		if (clock_monotonic() - shown >= STAGE_PROGRESS_SECONDS) {
			progress(s, t0, had);
			shown = clock_monotonic();
		}
	}
	return s->failed;
}

/* ------------------------------------------------------------ the stage */

/* The node's launchers take turns: the first stages, the others find it done. */
static int lock_stage(const struct stage *s, char *err, size_t errlen)
{
	char path[4200];
	double deadline = clock_monotonic() + s->cfg->run.rendezvous_timeout;
	int fd;

	msg_format(path, sizeof path, "%s/.stork-stage.lock", s->dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		msg_format(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || clock_monotonic() > deadline) {
			msg_format(err, errlen, "cannot lock %s: %s", path,
				   errno == EWOULDBLOCK ? "another launcher held it past run.rendezvous_timeout" :
							  strerror(errno));
			close(fd);
			return -1;
		}
		usleep(100 * 1000);
	}
	return fd; /* the lock goes with the descriptor, at exit at the latest */
}

/* What an earlier attempt (or launcher) staged and verified is used again. */
static void reuse_staged(struct stage *s)
{
	for (int i = 0; i < s->n; i++) {
		struct shard *sh = &s->shards[i];
		char why[512], rec[4200];

		if (access(sh->path, F_OK) < 0)
			continue;
		if (verify(sh, sh->path, why, sizeof why) == 0 && matches_record(sh, why, sizeof why) == 0) {
			struct stat st;

			sh->done = 1;
			sh->have = sh->size = stat(sh->path, &st) == 0 ? st.st_size : 0;
			stork_info("%s: staged already as %s", sh->shown, sh->path);
			continue;
		}
		stork_warn("%s: the staged %s is not usable (%s): staging it again", sh->shown, sh->path, why);
		unlink(sh->path);
		record_path(sh, rec, sizeof rec);
		unlink(rec);
	}
}

/* clock_monotonic() when staging must stop for a job that ends at job_end; 0: never. */
static double stop_time(const struct stork_config *cfg, time_t job_end)
{
	if (!job_end)
		return 0;
	return clock_monotonic() + (double)(job_end - time(NULL)) - STAGE_END_RESERVE_S -
	       cfg->preempt.deadline_lead;
}

int stage_data(const struct stork_config *cfg, time_t job_end, char *err, size_t errlen)
{
	struct stage s = { .cfg = cfg, .job_end = job_end, .stop_at = stop_time(cfg, job_end) };
	const struct stork_globs *lists[] = { &cfg->data.train, &cfg->data.val };
	int rc = STORK_EXIT_DATA, lock = -1, left = 0;

	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++)
			if (url_is_http(lists[l]->v[i]) && !s.dir[0] &&
			    stage_dir_resolve(cfg->data.stage_dir, s.dir, sizeof s.dir) < 0) {
				msg_format(err, errlen, "data.stage_dir: the path is too long");
				return STORK_EXIT_CONFIG;
			}
	if (!s.dir[0])
		return 0; /* no URLs */
	if (cfg->data.token_env[0]) {
		const char *t = getenv(cfg->data.token_env);

		if (!t || !*t) {
			msg_format(err, errlen, "data.token_env: the environment variable %s is not set",
				   cfg->data.token_env);
			return STORK_EXIT_CONFIG;
		}
		snprintf(s.token, sizeof s.token, "%s", t);
		for (int l = 0; l < 2; l++)
			for (size_t i = 0; i < lists[l]->n; i++)
				if (!strncasecmp(lists[l]->v[i], "http://", 7)) {
					char shown[1024];

					url_public(lists[l]->v[i], shown, sizeof shown);
					msg_format(err, errlen, "data.token_env: %s would send the "
						   "bearer token in clear over http; serve the data "
						   "over https", shown);
					return STORK_EXIT_CONFIG;
				}
	}
	if (cfg->data.netrc[0] && access(cfg->data.netrc, R_OK) < 0) {
		msg_format(err, errlen, "data.netrc: cannot read %s: %s", cfg->data.netrc, strerror(errno));
		return STORK_EXIT_CONFIG;
	}
	if (private_dir_make(s.dir, "stage directory", "data.stage_dir", err, errlen) < 0 || (lock = lock_stage(&s, err, errlen)) < 0)
		return STORK_EXIT_DATA;
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++)
			if (url_is_http(lists[l]->v[i]) && add_url(&s, lists[l]->v[i]) < 0) {
				msg_format(err, errlen, "out of memory, or a stage path too long, for %s",
					   lists[l]->v[i]);
				goto out;
			}
	if (read_manifest(&s) < 0) {
		msg_format(err, errlen, "%s", s.err);
		rc = STORK_EXIT_CONFIG;
		goto out;
	}
	reuse_staged(&s);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(s.multi = curl_multi_init())) {
		msg_format(err, errlen, "libcurl cannot start");
		goto out;
	}
	for (int i = 0; i < s.n; i++)
		left += !s.shards[i].done;
	if (left)
		stork_info("staging %d of %d URL shard(s) into %s, %d at a time", left, s.n, s.dir,
			   cfg->data.downloads);
	rc = run_transfers(&s);
	if (rc)
		msg_format(err, errlen, "%s", s.err);
out:
	/* a failure leaves the other transfers where they were: their .part
	 * files stay for the next attempt to go on from */
	for (int i = 0; i < s.n; i++) {
		if (s.shards[i].running) {
			curl_multi_remove_handle(s.multi, s.shards[i].easy);
			curl_easy_cleanup(s.shards[i].easy);
		}
		if (s.shards[i].f)
			fclose(s.shards[i].f);
	}
	if (s.multi)
		curl_multi_cleanup(s.multi);
	free(s.shards);
	if (lock >= 0)
		close(lock);
	return rc;
}
