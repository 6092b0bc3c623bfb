/*
 * launcher/run/notify.c - see notify.h.
 *
 * The document is JSON: event, run, job, requeue, step, reason, message,
 * host, run_dir, time, and `text`, one line saying all of it, which Slack
 * and Mattermost incoming web hooks display as it is. The URL's path and
 * query (where hooks keep their secret) never reach a log line.
 */
#include "config.h"
#include "launcher/run/notify.h"

#include "lib/clock.h"
#include "lib/env_number.h"
#include "lib/log.h"
#include "lib/formats/stork_json.h"
#include "lib/url.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOTIFY_TRIES 3

struct notify_msg {
	struct notify_msg *next;
	char event[16];
	char *body;
};

struct notify {
	char *url;
	char shown[512];               /* the URL as logs may show it */
	double timeout;
	const struct stork_globs *events;
	char run[256], run_dir[4096], job[32], host[64];
	int requeue;

	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct notify_msg *head, *tail;
	int busy;                      /* the thread is delivering a message */
	int closing;
};

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/*
 * POST body; 0 when the receiver answered 2xx. A 4xx answer is final (the
 * hook is wrong or gone); 5xx and connection errors are tried again.
 */
static int post(struct notify *n, const char *body, char *why, size_t len, int *final)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdr = NULL;
	long status = 0;
	CURLcode rc;

	*final = 0;
	if (!c) {
		snprintf(why, len, "libcurl cannot start");
		return -1;
	}
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, n->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(n->timeout * 1000));
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM in a threaded process */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		/* curl's message may quote the URL: give only its code's text */
		snprintf(why, len, "%s", curl_easy_strerror(rc));
		return -1;
	}
	if (status >= 200 && status < 300)
		return 0;
	snprintf(why, len, "HTTP status %ld", status);
	*final = status >= 400 && status < 500;
	return -1;
}

static void deliver(struct notify *n, const struct notify_msg *m)
{
	char why[256] = "";
	int final = 0;

	for (int t = 0; t < NOTIFY_TRIES; t++) {
		if (t)
			sleep((unsigned)t); /* 1 s, then 2 s */
		if (post(n, m->body, why, sizeof why, &final) == 0)
			return;
		if (final)
			break;
	}
	stork_warn("notify: the '%s' event was not delivered to %s: %s", m->event, n->shown, why);
}

static void *notify_main(void *arg)
{
	struct notify *n = arg;

	pthread_mutex_lock(&n->lock);
	for (;;) {
		struct notify_msg *m;

		while (!n->head && !n->closing)
			pthread_cond_wait(&n->changed, &n->lock);
		if (!n->head)
			break;
		m = n->head;
		n->head = m->next;
		if (!n->head)
			n->tail = NULL;
		n->busy = 1;
		pthread_mutex_unlock(&n->lock);
		deliver(n, m);
		free(m->body);
		free(m);
		pthread_mutex_lock(&n->lock);
		n->busy = 0;
		pthread_cond_broadcast(&n->changed);
	}
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

struct notify *notify_open(const struct stork_config *cfg, const char *run_dir)
{
	const char *url = cfg->notify.url && cfg->notify.url[0] ? cfg->notify.url : getenv("STORK_NOTIFY_URL");
	const char *base = strrchr(run_dir, '/'), *s;
	struct notify *n;
	long long requeue;
	char why[256];

	if (!url || !*url)
		return NULL;
	if (!(n = calloc(1, sizeof *n)) || !(n->url = strdup(url))) {
		free(n);
		stork_warn("notify: out of memory; no events are sent");
		return NULL;
	}
	url_redact(url, n->shown, sizeof n->shown);
	if (!url_is_http(url)) {
		stork_warn("notify: %s is not an http:// or https:// URL; no events are sent", n->shown);
		goto fail;
	}
	n->timeout = cfg->notify.timeout;
	n->events = &cfg->notify.events;
	snprintf(n->run, sizeof n->run, "%s", base ? base + 1 : run_dir);
	snprintf(n->run_dir, sizeof n->run_dir, "%s", run_dir);
	snprintf(n->job, sizeof n->job, "%s", (s = getenv("SLURM_JOB_ID")) && *s ? s : "local");
	/* stork run has refused a malformed SLURM_RESTART_COUNT before this */
	if (env_number("SLURM_RESTART_COUNT", 0, INT_MAX, 0, &requeue, why, sizeof why) == 0)
		n->requeue = (int)requeue;
	gethostname(n->host, sizeof n->host - 1);
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->changed, NULL);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    pthread_create(&n->thread, NULL, notify_main, n)) {
		stork_warn("notify: cannot start the delivery thread; no events are sent");
		goto fail;
	}
	return n;
fail:
	free(n->url);
	free(n);
	return NULL;
}

static int wanted(const struct notify *n, const char *event)
{
	for (size_t i = 0; i < n->events->n; i++)
		if (!strcmp(n->events->v[i], event))
			return 1;
	return 0;
}

/* "stork: run NAME (job J) EVENT[ at step S][: REASON] on HOST[ - MESSAGE]" */
static void one_line(const struct notify *n, char *text, size_t len, const char *event,
		     int64_t step, const char *reason, const char *message)
{
	char at[32] = "";

	if (step >= 0)
		snprintf(at, sizeof at, " at step %lld", (long long)step);
	snprintf(text, len, "stork: run %s (job %s) %s%s%s%s on %s%s%s", n->run, n->job, event, at,
		 reason && *reason ? ": " : "", reason ? reason : "", n->host,
		 message && *message ? " - " : "", message ? message : "");
}

void notify_event(struct notify *n, const char *event, int64_t step, const char *reason,
		  const char *message)
{
	struct notify_msg *m;
	char text[2048], when[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *v;

	if (!n || !wanted(n, event) || !(m = calloc(1, sizeof *m)))
		return;
	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	one_line(n, text, sizeof text, event, step, reason, message);
	v = json_pack("{s:s, s:o, s:s, s:i, s:I, s:o, s:o, s:o, s:o, s:s, s:o}", "event", event,
		      "run", sj_text(n->run), "job", n->job, "requeue", n->requeue, "step",
		      (json_int_t)step, "reason", sj_text(reason ? reason : ""), "message",
		      sj_text(message ? message : ""), "host", sj_text(n->host), "run_dir",
		      sj_text(n->run_dir), "time", when, "text", sj_text(text));
	snprintf(m->event, sizeof m->event, "%s", event);
	m->body = v ? sj_compact(v) : NULL;
	json_decref(v);
	if (!m->body) {
		free(m);
		return;
	}
	pthread_mutex_lock(&n->lock);
	if (n->tail)
		n->tail->next = m;
	else
		n->head = m;
	n->tail = m;
	pthread_cond_broadcast(&n->changed);
	pthread_mutex_unlock(&n->lock);
}

void notify_close(struct notify *n)
{
	double deadline;
	int left = 0;

	if (!n)
		return;
	deadline = clock_monotonic() + n->timeout;
	pthread_mutex_lock(&n->lock);
	n->closing = 1;
	pthread_cond_broadcast(&n->changed);
	while ((n->head || n->busy) && clock_monotonic() < deadline) {
		struct timespec ts = clock_wall_in_ms(100);

		pthread_cond_timedwait(&n->changed, &n->lock, &ts);
	}
	for (struct notify_msg *m = n->head; m; m = m->next)
		left++;
	left += n->busy;
	pthread_mutex_unlock(&n->lock);
	if (left) {
		/* the thread may be inside a POST: leave it to the process's exit */
		stork_warn("notify: %d event(s) not delivered to %s within notify.timeout (%g s)", left,
			   n->shown, n->timeout);
		return;
	}
	pthread_join(n->thread, NULL);
	curl_global_cleanup();
	free(n->url);
	free(n);
}
