/*
 * lib/rendezvous/rendezvous_tcp.c - the rendezvous without PMIx: a star on launcher 0.
 *
 * Launcher 0 listens on the step's MASTER_PORT, on the address the others
 * connect to (MASTER_ADDR, the step's first host), not on every address;
 * the others connect, retrying until the deadline (launcher 0 may start
 * later than they do), and send a hello:
 *
 *   magic "SRDV", version, job id, step id, count, index, blob length,
 *   credential length, credential, blob
 *
 * (integers big-endian, 32 bits except the 64-bit length). The credential
 * (lib/rendezvous/rendezvous_auth.h: munge) vouches for the hello's fields and the
 * blob's hash with the sender's uid. Launcher 0 serves every connection
 * from one poll loop, so a silent or slow peer never holds up the others,
 * and refuses, naming the peer's address and why in its log: a wrong magic
 * or version (closed without a word), another job, step or count, an index
 * out of range or already taken, a blob or credential over the limits, a
 * credential that is not the job user's or not for this hello or this
 * blob (checked before the blob is even read, so a stranger never makes it
 * allocate more than a credential), and a connection that has sent no
 * valid hello within IDENTIFY_S. Under a flood of connections (anyone who
 * reaches the port can open hundreds) a launcher still gets in: what a new
 * connection already sent is read the moment it is accepted, a connection
 * that has identified itself is never closed to make room, one address
 * holds at most UNIDENTIFIED_PER_HOST unidentified connections (its own
 * oldest makes room for its next), and room is made first from those that
 * sent nothing; the log names the first connection closed so and counts
 * the others. A peer that has not shown the job user's
 * credential for its hello is closed without a word: launcher 0 signs
 * nothing for a stranger (a signed error would be a munge signing oracle,
 * and load the node's munged for anyone who reaches the port); its log
 * still says why. When all count-1 hellos are in, it closes
 * the listener and sends each launcher the reply
 *
 *   magic, version, status 0, n, credential length, credential, then n
 *   times (length, blob) in index order
 *
 * whose credential, one per launcher (munged refuses to decode one twice),
 * vouches for the table. A launcher accepts only a reply credentialed by
 * the job's user; a refused connection, a connection closed without a
 * reply or a reply it cannot trust makes it connect again, with a new
 * credential, until the deadline. At the deadline launcher 0 sends the
 * others status 1 and a message naming the launchers that never arrived
 * (credentialed too), and fails with the same message. A launcher that
 * connected but hears nothing by its own deadline (plus a little, so
 * launcher 0's verdict can arrive) says so.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/bounded.h"
#include "lib/log.h"
#include "lib/rendezvous/rendezvous_auth.h"
#include "lib/rendezvous/rendezvous_impl.h"

#define RDV_MAGIC 0x53524456u	/* "SRDV" */
#define RDV_VERSION 2u		/* 2: with credentials */
#define HELLO_LEN 36
#define REPLY_LEN 28
#define IDENTIFY_S 10.0		/* seconds a connection has to send a valid hello */
#define UNIDENTIFIED_PER_HOST 8	/* connections one address may hold before it identifies */
#define STATUS_OK 0u
#define STATUS_ERROR 1u
#define REPLY_GRACE 2.0		/* seconds a connected launcher waits past its deadline */
#define SEND_GRACE 10.0		/* seconds launcher 0 may spend sending the table */

struct hello {
	uint32_t magic, version, job_id, step_id, count, index;
	uint64_t len;
	uint32_t cred_len;
};

/*
 * A connection launcher 0 has accepted but not yet identified: a socket,
 * or (rdv_tcp_hello_parse, fd -1) the bytes a peer sent, in memory.
 */
struct conn {
	int fd;
	const unsigned char *sent;	/* without a socket: the bytes, their end the peer's close */
	size_t sent_len, sent_off;
	unsigned char hdr[HELLO_LEN];
	struct hello h;
	char cred[RDV_CRED_MAX];
	char digest[65];	/* the blob's hash, as the verified credential says */
	int identified;		/* its credential is the job user's, for this hello */
	unsigned char *blob;
	size_t have;		/* bytes of hdr, then cred, then blob, received */
	double opened;		/* when it was accepted */
	char from[64];		/* peer address and port, for messages */
	char host[64];		/* peer address alone: UNIDENTIFIED_PER_HOST counts by it */
};

/* ------------------------------------------------------------ wire format */

static void put32(unsigned char *b, uint32_t v)
{
	v = htobe32(v);
	memcpy(b, &v, 4);
}

static void put64(unsigned char *b, uint64_t v)
{
	v = htobe64(v);
	memcpy(b, &v, 8);
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v;
	memcpy(&v, b, 4);
	return be32toh(v);
}

static uint64_t get64(const unsigned char *b)
{
	uint64_t v;
	memcpy(&v, b, 8);
	return be64toh(v);
}

static void hello_decode(const unsigned char *b, struct hello *h)
{
	h->magic = get32(b);
	h->version = get32(b + 4);
	h->job_id = get32(b + 8);
	h->step_id = get32(b + 12);
	h->count = get32(b + 16);
	h->index = get32(b + 20);
	h->len = get64(b + 24);
	h->cred_len = get32(b + 32);
}

/* What a credential says a message is. */
static void hello_what(const struct rdv_params *p, unsigned index, char *buf, size_t len)
{
	snprintf(buf, len, "hello job=%u step=%u port=%u count=%d index=%u", p->job_id, p->step_id,
		 p->port, p->count, index);
}

static void reply_what(const struct rdv_params *p, unsigned index, unsigned status, char *buf,
		       size_t len)
{
	snprintf(buf, len, "%s job=%u step=%u port=%u count=%d index=%u",
		 status == 0 ? "table" : "error", p->job_id, p->step_id, p->port, p->count, index);
}

/* Credentials outlive the rendezvous' wait, within munged's own limit. */
static int cred_ttl(const struct rdv_params *p)
{
	double t = (p->timeout > 0 ? p->timeout : RDV_DEFAULT_TIMEOUT) + 60;

	return t > 3600 ? 3600 : (int)t;
}

/* ------------------------------------------------------------ socket I/O */

static int remaining_ms(double deadline)
{
	double left = deadline - rdv_now();
	if (left <= 0)
		return 0;
	return left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

/* Wait until fd is ready for events or the deadline passes (-1, ETIMEDOUT).
 * A signal only ends the wait early: the caller tries again. */
static int wait_ready(int fd, short events, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int ms = remaining_ms(deadline);

	if (ms == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
		return -1;
	return 0;
}

static void set_socket_options(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/*
 * Send all of buf on a non-blocking socket by the deadline (not lib/io/io.h's
 * write_all: that one blocks, this one waits with poll). 0, or -1 with errno.
 */
static int send_all(int fd, const void *buf, size_t len, double deadline)
{
	const unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_ready(fd, POLLOUT, deadline) < 0)
			return -1;
	}
	return 0;
}

/*
 * Receive exactly len bytes on a non-blocking socket by the deadline. 0, or -1
 * with errno (ETIMEDOUT at the deadline, ECONNRESET for an early end).
 */
static int recv_all(int fd, void *buf, size_t len, double deadline)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_ready(fd, POLLIN, deadline) < 0)
			return -1;
	}
	return 0;
}

/* A reply with status 1 and a message, credentialed for launcher index. */
static void send_error(const struct rdv_params *p, int fd, unsigned index, const char *msg,
		       double deadline)
{
	size_t mlen = strlen(msg), clen;
	char what[256], *cred = NULL, why[512];
	unsigned char *b;

	reply_what(p, index, 1, what, sizeof what);
	if (rdv_auth_sign(what, msg, mlen, cred_ttl(p), p->secret_file, &cred, why, sizeof why) < 0) {
		stork_warn("%s", why);
		return;
	}
	clen = strlen(cred);
	if ((b = malloc(REPLY_LEN + clen + mlen))) {
		put32(b, RDV_MAGIC);
		put32(b + 4, RDV_VERSION);
		put32(b + 8, STATUS_ERROR);
		put32(b + 12, 0);
		put32(b + 16, (uint32_t)clen);
		put64(b + 20, mlen);
		memcpy(b + REPLY_LEN, cred, clen);
		memcpy(b + REPLY_LEN + clen, msg, mlen);
		(void)send_all(fd, b, REPLY_LEN + clen + mlen, deadline);
		free(b);
	}
	free(cred);
}

static void sockaddr_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%u", host, port);
}

/* ------------------------------------------------------------ launcher 0 */

/* A listening socket at sa, or -1 with errno. */
static int listen_at(const struct sockaddr *sa, socklen_t sl)
{
	int one = 1, fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, sa, sl) == 0 && listen(fd, 128) == 0)
		return fd;
	one = errno;
	close(fd);
	errno = one;
	return -1;
}

/*
 * Listen at port on the address the other launchers connect to (the first
 * of MASTER_ADDR's addresses that is this host's), so the rendezvous is not
 * offered on every network of the node. Only when no address of that name
 * is local (a MASTER_ADDR naming a proxy, say) on every address, with a
 * warning.
 */
static int listen_on(const struct rdv_params *p, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	struct sockaddr_in6 any = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	char port[16];
	int fd = -1, saved = EADDRNOTAVAIL;

	snprintf(port, sizeof port, "%u", p->port);
	if (p->addr[0] && getaddrinfo(p->addr, port, &hints, &res) == 0)
		for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
			if ((fd = listen_at(ai->ai_addr, ai->ai_addrlen)) < 0 &&
			    (saved = errno) == EADDRINUSE)
				break;
	if (res)
		freeaddrinfo(res);
	if (fd < 0 && saved != EADDRINUSE) {
		struct sockaddr_in any4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
					    .sin_port = htons((uint16_t)p->port) };

		stork_warn("rendezvous: no address of %s is this host's: listening on every address "
			   "of port %u", p->addr[0] ? p->addr : "(MASTER_ADDR unset)", p->port);
		any.sin6_port = htons((uint16_t)p->port);
		/* IPv6 (dual-stack, Linux's default) when the host has it, else IPv4 */
		fd = listen_at((struct sockaddr *)&any, sizeof any);
		if (fd < 0 && errno != EADDRINUSE)
			fd = listen_at((struct sockaddr *)&any4, sizeof any4);
		saved = errno;
	}
	if (fd >= 0)
		return fd;
	snprintf(err, errlen, "rendezvous: launcher 0 cannot listen on port %u: %s%s", p->port,
		 strerror(saved),
		 saved == EADDRINUSE ? " (another program or step holds it; set MASTER_PORT to a "
				       "free port for every launcher, or change the plugin's port_base)"
				     : "");
	return -1;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->blob);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

/*
 * Check a complete hello header against this step. Returns 0 to go on,
 * -1 for a stranger (close silently), 1 with a message in msg (reply, close).
 */
static int hello_check(const struct rdv_params *p, const struct hello *h, const bool *arrived,
		       char *msg, size_t len)
{
	if (h->magic != RDV_MAGIC || h->version != RDV_VERSION)
		return -1;
	if (h->job_id != p->job_id || h->step_id != p->step_id) {
		snprintf(msg, len, "this port serves the rendezvous of job %u step %u, not of job %u step %u",
			 p->job_id, p->step_id, h->job_id, h->step_id);
		return 1;
	}
	if (h->count != (uint32_t)p->count) {
		snprintf(msg, len, "launcher %u counts %u launchers, launcher 0 counts %d: the step's "
			 "launchers disagree on SLURM_STEP_NUM_TASKS", h->index, h->count, p->count);
		return 1;
	}
	if (h->index == 0 || h->index >= (uint32_t)p->count) {
		snprintf(msg, len, "launcher index %u is out of range 1..%d", h->index, p->count - 1);
		return 1;
	}
	if (arrived[h->index]) {
		snprintf(msg, len, "launcher %u arrived twice: two processes claim the same index",
			 h->index);
		return 1;
	}
	if (h->len > RDV_MAX_BLOB) {
		snprintf(msg, len, "launcher %u sends %llu bytes, more than the limit of %u", h->index,
			 (unsigned long long)h->len, RDV_MAX_BLOB);
		return 1;
	}
	if (h->cred_len == 0 || h->cred_len > RDV_CRED_MAX) {
		snprintf(msg, len, "launcher %u sends a credential of %u bytes (1..%d)", h->index,
			 h->cred_len, RDV_CRED_MAX);
		return 1;
	}
	return 0;
}

/*
 * Read and drop what the peer already sent (a little at most): a socket
 * closed with unread data sends a reset, which may take the refusal's
 * message with it.
 */
static void drain(int fd)
{
	unsigned char sink[4096];

	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 256 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
		;
}

/* Refuse c: say why in the log and, unless quiet, to the peer; close it. */
static void refuse(const struct rdv_params *p, struct conn *c, const char *why, int quiet,
		   double deadline)
{
	char claim[48] = "";

	if (c->have >= HELLO_LEN)
		snprintf(claim, sizeof claim, " claiming launcher %u", c->h.index);
	stork_warn("rendezvous: refused a connection from %s%s: %s", c->from, claim, why);
	if (c->fd >= 0 && !quiet) /* bytes in memory have no peer to tell */
		send_error(p, c->fd, c->have >= HELLO_LEN ? c->h.index : 0, why, deadline);
	if (c->fd >= 0)
		drain(c->fd);
	conn_close(c);
}

/* recv on c's socket, or the next of the bytes in memory (0 at their end). */
static ssize_t conn_recv(struct conn *c, void *dst, size_t want)
{
	size_t n = c->sent_len - c->sent_off;

	if (c->fd >= 0)
		return recv(c->fd, dst, want, 0);
	if (n > want)
		n = want;
	memcpy(dst, c->sent + c->sent_off, n);
	c->sent_off += n;
	return (ssize_t)n;
}

/* The hello's header is in: check it, then make room for the credential. */
static int header_done(const struct rdv_params *p, struct conn *c, const bool *arrived,
		       double deadline)
{
	char msg[256];
	int rc;

	hello_decode(c->hdr, &c->h);
	rc = hello_check(p, &c->h, arrived, msg, sizeof msg);
	/* no credential seen yet: whatever is wrong, nothing signed goes back */
	if (rc < 0)
		refuse(p, c, "not a Stork rendezvous peer of this version", 1, deadline);
	else if (rc > 0)
		refuse(p, c, msg, 1, deadline);
	return rc ? -1 : 0;
}

/*
 * The credential is in: it must be the job user's, for this very hello;
 * only then is room made for the blob (a stranger never gets launcher 0
 * to allocate more than a credential).
 */
static int cred_done(const struct rdv_params *p, struct conn *c, double deadline)
{
	char what[256], why[512];

	hello_what(p, c->h.index, what, sizeof what);
	if (rdv_auth_verify_what(c->cred, c->h.cred_len, what, p->secret_file, c->digest, why,
				 sizeof why) < 0) {
		char msg[640];

		snprintf(msg, sizeof msg, "launcher %u's hello is not the job's: %s", c->h.index, why);
		refuse(p, c, msg, 1, deadline);
		return -1;
	}
	c->identified = 1;
	if (!(c->blob = malloc(c->h.len ? c->h.len : 1))) {
		conn_close(c);
		return -1;
	}
	return 0;
}

/*
 * Read what is available on c. Returns 0 while incomplete, 1 when the hello,
 * its credential and its blob are complete and check out (c->blob is then
 * ready), -1 when c was closed.
 */
static int conn_progress(const struct rdv_params *p, struct conn *c, const bool *arrived,
			 double deadline)
{
	for (;;) {
		size_t cred_end = HELLO_LEN + c->h.cred_len, end = cred_end + c->h.len;
		bool in_hdr = c->have < HELLO_LEN, in_cred = !in_hdr && c->have < cred_end;
		unsigned char *dst = in_hdr ? c->hdr + c->have :
				     in_cred ? (unsigned char *)c->cred + (c->have - HELLO_LEN) :
					       c->blob + (c->have - cred_end);
		size_t want = in_hdr ? HELLO_LEN - c->have : in_cred ? cred_end - c->have : end - c->have;

		if (want == 0) {
			if (rdv_auth_check_data(c->digest, c->blob, c->h.len) < 0) {
				refuse(p, c, "its credential vouches for another blob", 0, deadline);
				return -1;
			}
			return 1;
		}
		ssize_t n = conn_recv(c, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			stork_warn("rendezvous: a connection from %s closed before its hello was complete",
				   c->from);
			conn_close(c);
			return -1;
		}
		c->have += (size_t)n;
		if (in_hdr && c->have == HELLO_LEN && header_done(p, c, arrived, deadline) < 0)
			return -1;
		if (in_cred && c->have == cred_end && cred_done(p, c, deadline) < 0)
			return -1;
	}
}

int rdv_tcp_hello_parse(const struct rdv_params *p, const void *buf, size_t len,
			const bool *arrived, struct rdv_peer *peer)
{
	struct conn c = { .fd = -1, .sent = buf, .sent_len = len, .opened = rdv_now(),
			  .from = "(bytes in memory)" };

	if (conn_progress(p, &c, arrived, rdv_now() + 1.0) != 1)
		return -1; /* refused or cut short: c is closed */
	*peer = (struct rdv_peer){ .index = (int)c.h.index, .blob = c.blob, .len = c.h.len };
	return 0;
}

/*
 * What launcher 0 is gathering: the connections not yet identified or not
 * yet complete (slots), the launchers that arrived, and the connections it
 * closed unheard, named once and then counted so that a flood cannot fill
 * the log.
 */
struct gathering {
	const struct rdv_params *p;
	struct conn *conns;
	int nconns;
	struct rdv_peer *peers;
	int *fds;
	bool *arrived;
	int got;
	double deadline;
	unsigned crowded;	/* closed to make room for a newer connection */
	unsigned silent;	/* closed after IDENTIFY_S without a valid hello */
};

/* Close c, unheard: the first of each kind is named in the log. */
static void close_unheard(struct gathering *g, struct conn *c, bool crowded)
{
	if (crowded && g->crowded++ == 0)
		stork_warn("rendezvous: too many connections: closed the one from %s, which had not "
			   "identified itself (any more are counted at the end)", c->from);
	if (!crowded && g->silent++ == 0)
		stork_warn("rendezvous: closed the connection from %s: no valid hello within %.0f s "
			   "(any more are counted at the end)", c->from, IDENTIFY_S);
	conn_close(c);
}

/* The count of the connections closed unheard, when more than the one named. */
static void say_unheard(const struct gathering *g)
{
	if (g->crowded > 1 || g->silent > 1)
		stork_warn("rendezvous: closed %u connection(s) that had not identified themselves to "
			   "make room for others, and %u that sent no valid hello within %.0f s",
			   g->crowded, g->silent, IDENTIFY_S);
}

/* Is b a better connection to close than a (-1: none yet)? The one that has
 * sent nothing before one that has, then the older. */
static bool rather_close(const struct conn *conns, int a, int b)
{
	if (a < 0)
		return true;
	if ((conns[a].have == 0) != (conns[b].have == 0))
		return conns[b].have == 0;
	return conns[b].opened < conns[a].opened;
}

/*
 * A slot for a new connection from host: host's own choice among its
 * unidentified connections once it holds UNIDENTIFIED_PER_HOST of them, else
 * a free slot, else the choice among everyone's unidentified ones; -1 when
 * every slot holds a launcher that identified itself.
 */
static int slot_for(struct gathering *g, const char *host)
{
	int free_slot = -1, own = -1, any = -1, held = 0;

	for (int i = 0; i < g->nconns; i++) {
		const struct conn *c = &g->conns[i];

		if (c->fd < 0) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (c->identified)
			continue;
		if (rather_close(g->conns, any, i))
			any = i;
		if (!strcmp(c->host, host)) {
			held++;
			if (rather_close(g->conns, own, i))
				own = i;
		}
	}
	int slot = held >= UNIDENTIFIED_PER_HOST ? own : free_slot >= 0 ? free_slot : any;
	if (slot >= 0 && g->conns[slot].fd >= 0)
		close_unheard(g, &g->conns[slot], true);
	return slot;
}

/* Close the connections that sent no valid hello within IDENTIFY_S. */
static void close_silent(struct gathering *g)
{
	double now = rdv_now();

	for (int i = 0; i < g->nconns; i++)
		if (g->conns[i].fd >= 0 && !g->conns[i].identified &&
		    now - g->conns[i].opened > IDENTIFY_S)
			close_unheard(g, &g->conns[i], false);
}

/*
 * Read what connection i has sent; once its hello is complete, its launcher
 * has arrived and leaves the slots. Two connections for one index may both
 * pass the header's check: the first complete hello takes the place.
 */
static void hear(struct gathering *g, int i)
{
	struct conn *c = &g->conns[i];

	if (c->fd < 0 || conn_progress(g->p, c, g->arrived, g->deadline) != 1)
		return;
	int idx = (int)c->h.index;
	if (g->arrived[idx]) {
		char msg[128];

		snprintf(msg, sizeof msg, "launcher %d arrived twice: two processes claim the same "
			 "index", idx);
		refuse(g->p, c, msg, 0, g->deadline);
		return;
	}
	g->peers[idx].blob = c->blob;
	g->peers[idx].len = c->h.len;
	g->fds[idx] = c->fd;
	g->arrived[idx] = true;
	g->got++;
	c->blob = NULL;
	c->fd = -1;
	conn_close(c);
}

/*
 * Accept the connections waiting, at most a round of slots (a flood that
 * never stops must not keep launcher 0 from reading the others), each
 * heard at once: a launcher's hello is usually there before it is accepted.
 */
static void accept_waiting(struct gathering *g, int lfd)
{
	for (int n = 0; n < g->nconns; n++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		char from[sizeof g->conns->from], host[sizeof from], *colon;
		int slot;

		if (fd < 0)
			return;
		sockaddr_name((struct sockaddr *)&ss, from, sizeof from);
		snprintf(host, sizeof host, "%s", from);
		if ((colon = strrchr(host, ':')))
			*colon = '\0';
		if ((slot = slot_for(g, host)) < 0) {
			close(fd); /* every slot holds a launcher: this one is surplus */
			continue;
		}
		set_socket_options(fd);
		g->conns[slot].fd = fd;
		g->conns[slot].opened = rdv_now();
		memcpy(g->conns[slot].from, from, sizeof from);
		memcpy(g->conns[slot].host, host, sizeof host);
		hear(g, slot);
	}
}

/* The success reply's table: (length, blob) for every launcher. */
static unsigned char *build_table(const struct rdv_peer *peers, int n, size_t *out_len)
{
	size_t total = 0, off = 0;
	unsigned char *b;

	for (int i = 0; i < n; i++)
		total += 8 + peers[i].len;
	if (!(b = malloc(total ? total : 1)))
		return NULL;
	for (int i = 0; i < n; i++) {
		put64(b + off, peers[i].len);
		memcpy(b + off + 8, peers[i].blob, peers[i].len);
		off += 8 + peers[i].len;
	}
	*out_len = total;
	return b;
}

/* The table to launcher index, with a credential of its own. */
static int send_table(const struct rdv_params *p, int fd, int index, const unsigned char *table,
		      size_t len, double deadline)
{
	unsigned char hdr[REPLY_LEN];
	char what[256], *cred = NULL, why[512];
	int rc = -1;

	reply_what(p, (unsigned)index, 0, what, sizeof what);
	if (rdv_auth_sign(what, table, len, cred_ttl(p), p->secret_file, &cred, why, sizeof why) < 0) {
		stork_warn("%s", why);
		return -1;
	}
	put32(hdr, RDV_MAGIC);
	put32(hdr + 4, RDV_VERSION);
	put32(hdr + 8, STATUS_OK);
	put32(hdr + 12, (uint32_t)p->count);
	put32(hdr + 16, (uint32_t)strlen(cred));
	put64(hdr + 20, len);
	if (send_all(fd, hdr, REPLY_LEN, deadline) == 0 &&
	    send_all(fd, cred, strlen(cred), deadline) == 0 &&
	    send_all(fd, table, len, deadline) == 0)
		rc = 0;
	free(cred);
	return rc;
}

/* Gather until everyone arrived or the deadline. Returns arrivals. */
static int gather(struct gathering *g, int lfd)
{
	struct pollfd *pfds = calloc((size_t)g->nconns + 1, sizeof *pfds);

	if (!pfds)
		return g->got;
	while (g->got < g->p->count) {
		int ms = remaining_ms(g->deadline), np = 1;
		if (ms == 0)
			break;
		pfds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < g->nconns; i++)
			if (g->conns[i].fd >= 0)
				pfds[np++] = (struct pollfd){ .fd = g->conns[i].fd, .events = POLLIN };
		if (poll(pfds, (nfds_t)np, ms) < 0 && errno != EINTR)
			break;
		if (pfds[0].revents)
			accept_waiting(g, lfd);
		close_silent(g);
		for (int i = 0; i < g->nconns; i++)
			hear(g, i);
	}
	free(pfds);
	say_unheard(g);
	return g->got;
}

static int serve(const struct rdv_params *p, struct rdv_peer *peers, double deadline,
		 char *err, size_t errlen)
{
	int nconns = 2 * p->count + 16, got, rc = -1, lfd;
	struct conn *conns = calloc((size_t)nconns, sizeof *conns);
	int *fds = malloc((size_t)p->count * sizeof *fds);
	bool *arrived = calloc((size_t)p->count, sizeof *arrived);
	unsigned char *table = NULL;
	size_t table_len = 0;

	if (!conns || !fds || !arrived) {
		snprintf(err, errlen, "rendezvous: out of memory for %d launchers", p->count);
		goto fail;
	}
	for (int i = 0; i < nconns; i++)
		conns[i].fd = -1;
	for (int i = 0; i < p->count; i++)
		fds[i] = -1;
	arrived[0] = true;
	if ((lfd = listen_on(p, err, errlen)) < 0)
		goto fail;
	struct gathering g = { .p = p, .conns = conns, .nconns = nconns, .peers = peers, .fds = fds,
			       .arrived = arrived, .got = 1, .deadline = deadline };
	got = gather(&g, lfd);
	close(lfd);
	if (got < p->count) {
		char missing[2048], msg[2600];
		rdv_describe_missing(p, arrived, missing, sizeof missing);
		snprintf(msg, sizeof msg, "rendezvous: %d of %d launchers did not arrive within %g s: %s",
			 p->count - got, p->count, p->timeout, missing);
		for (int i = 1; i < p->count; i++)
			if (fds[i] >= 0)
				send_error(p, fds[i], (unsigned)i, msg, rdv_now() + 1.0);
		snprintf(err, errlen, "%s", msg);
		goto fail;
	}
	if (!(table = build_table(peers, p->count, &table_len))) {
		snprintf(err, errlen, "rendezvous: out of memory for the table of %d launchers", p->count);
		goto fail;
	}
	double send_deadline = rdv_now() + SEND_GRACE;
	for (int i = 1; i < p->count; i++)
		if (send_table(p, fds[i], i, table, table_len, send_deadline) < 0)
			stork_warn("rendezvous: could not send the table to launcher %d: %s", i,
				   strerror(errno));
	rc = 0;
fail:
	for (int i = 0; conns && i < nconns; i++)
		conn_close(&conns[i]);
	for (int i = 0; fds && i < p->count; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(conns);
	free(fds);
	free(arrived);
	free(table);
	return rc;
}

/* ------------------------------------------------------------ launcher > 0 */

/* One non-blocking connect attempt to ai, bounded by the deadline. */
static int try_connect(const struct addrinfo *ai, double deadline, int *err_out)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	int soerr = 0;
	socklen_t sl = sizeof soerr;

	if (fd < 0) {
		*err_out = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		*err_out = errno;
		close(fd);
		return -1;
	}
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int ms = remaining_ms(deadline);
	if (poll(&pfd, 1, ms < 1000 ? ms : 1000) <= 0) {
		*err_out = ETIMEDOUT;
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
		*err_out = soerr ? soerr : errno;
		close(fd);
		return -1;
	}
	return fd;
}

static void sleep_seconds(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Connect to launcher 0, retrying until the deadline. */
static int connect_master(const struct rdv_params *p, double deadline, char *err, size_t errlen)
{
	char port[16];
	double pause = 0.005;
	int last = ECONNREFUSED;
	const char *why = NULL;

	snprintf(port, sizeof port, "%u", p->port);
	while (rdv_now() < deadline) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
		int gai = getaddrinfo(p->addr, port, &hints, &res);
		if (gai != 0) {
			why = gai_strerror(gai);
		} else {
			for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
				int fd = try_connect(ai, deadline, &last);
				if (fd >= 0) {
					freeaddrinfo(res);
					set_socket_options(fd);
					return fd;
				}
			}
			freeaddrinfo(res);
			why = NULL;
		}
		double left = deadline - rdv_now();
		sleep_seconds(left < pause ? (left > 0 ? left : 0) : pause);
		pause = pause * 2 < 0.2 ? pause * 2 : 0.2;
	}
	snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u never answered within %g s "
		 "(%s): is launcher 0 running, and can this host reach %s:%u?", p->index, p->addr,
		 p->port, p->timeout, why ? why : strerror(last), p->addr, p->port);
	return -1;
}

/* Split the table (n times length, blob) into peers, within its bounds. */
static int parse_table(const struct rdv_params *p, const unsigned char *t, size_t len,
		       struct rdv_peer *peers, char *err, size_t errlen)
{
	size_t off = 0;

	for (int i = 0; i < p->count; i++) {
		uint64_t l;

		if (len - off < 8 || (l = get64(t + off)) > len - off - 8) {
			snprintf(err, errlen, "rendezvous: launcher %d: launcher 0's table ends inside "
				 "launcher %d's blob", p->index, i);
			return -1;
		}
		peers[i].index = i;
		peers[i].len = l;
		if (!(peers[i].blob = rdv_dup(t + off + 8, l))) {
			snprintf(err, errlen, "rendezvous: out of memory");
			return -1;
		}
		off += 8 + l;
	}
	return 0;
}

/* What one connection to launcher 0 gave. */
enum attempt { ATTEMPT_TABLE, ATTEMPT_ERROR, ATTEMPT_AGAIN };

/*
 * Where a launcher reads launcher 0's reply from: its socket (by the
 * deadline), or (rdv_tcp_reply_parse, fd -1) bytes in memory, whose end
 * reads as a closed connection.
 */
struct reply_src {
	int fd;
	double deadline;
	const unsigned char *buf;
	size_t len, off;
};

/* The next n bytes of the reply into dst. 0, or -1 with errno as recv_all. */
static int reply_take(struct reply_src *r, void *dst, size_t n)
{
	if (r->fd >= 0)
		return recv_all(r->fd, dst, n, r->deadline);
	if (n > r->len - r->off) {
		r->off = r->len;
		errno = ECONNRESET;
		return -1;
	}
	memcpy(dst, r->buf + r->off, n);
	r->off += n;
	return 0;
}

/*
 * Read launcher 0's reply: header, credential, body. A reply that is not
 * credentialed by the job's user for this launcher (another user's process
 * holding the port, or a forged answer) is refused and tried again.
 */
static enum attempt read_reply(const struct rdv_params *p, struct reply_src *r,
			       struct rdv_peer *peers, char *why, size_t whylen, char *err,
			       size_t errlen)
{
	unsigned char hdr[REPLY_LEN], *body = NULL;
	char cred[RDV_CRED_MAX], what[256], digest[65];
	uint32_t status, clen;
	uint64_t blen, limit;
	enum attempt got = ATTEMPT_AGAIN;

	if (reply_take(r, hdr, REPLY_LEN) < 0) {
		snprintf(why, whylen, "launcher 0 closed the connection without a reply (%s)",
			 errno == ECONNRESET ? "refused or dropped" : strerror(errno));
		return ATTEMPT_AGAIN;
	}
	status = get32(hdr + 8);
	clen = get32(hdr + 16);
	blen = get64(hdr + 20);
	limit = status == STATUS_OK ? (uint64_t)p->count * (8 + (uint64_t)RDV_MAX_BLOB) : 4096;
	if (get32(hdr) != RDV_MAGIC || get32(hdr + 4) != RDV_VERSION) {
		snprintf(why, whylen, "%s:%u is not a Stork rendezvous of this version (bad magic or "
			 "version): another program holds the port", p->addr, p->port);
		return ATTEMPT_AGAIN;
	}
	if (clen == 0 || clen > RDV_CRED_MAX || blen > limit ||
	    (status == STATUS_OK && get32(hdr + 12) != (uint32_t)p->count)) {
		snprintf(why, whylen, "launcher 0's reply is malformed (credential %u bytes, body "
			 "%llu bytes, %u launchers)", clen, (unsigned long long)blen, get32(hdr + 12));
		return ATTEMPT_AGAIN;
	}
	reply_what(p, (unsigned)p->index, status, what, sizeof what);
	if (reply_take(r, cred, clen) < 0 ||
	    rdv_auth_verify_what(cred, clen, what, p->secret_file, digest, why, whylen) < 0) {
		char detail[512];

		msg_format(detail, sizeof detail, "%s", why);
		snprintf(why, whylen, "refused a reply from %s:%u that is not launcher 0's: %s",
			 p->addr, p->port, errno == ECONNRESET ? "it closed the connection" : detail);
		stork_warn("rendezvous: launcher %d: %s", p->index, why);
		return ATTEMPT_AGAIN;
	}
	if (!(body = malloc(blen ? blen : 1)) || reply_take(r, body, blen) < 0 ||
	    rdv_auth_check_data(digest, body, blen) < 0) {
		snprintf(why, whylen, "launcher 0's reply was cut short or does not match its "
			 "credential");
		free(body);
		return ATTEMPT_AGAIN;
	}
	if (status != STATUS_OK) {
		snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u reports: %.*s",
			 p->index, p->addr, p->port, (int)blen, (char *)body);
		got = ATTEMPT_ERROR;
	} else {
		got = parse_table(p, body, blen, peers, err, errlen) == 0 ? ATTEMPT_TABLE : ATTEMPT_ERROR;
	}
	free(body);
	return got;
}

int rdv_tcp_reply_parse(const struct rdv_params *p, const void *buf, size_t len,
			struct rdv_peer *peers, char *err, size_t errlen)
{
	struct reply_src r = { .fd = -1, .buf = buf, .len = len };
	char why[1024] = "";

	switch (read_reply(p, &r, peers, why, sizeof why, err, errlen)) {
	case ATTEMPT_TABLE:
		return 0;
	case ATTEMPT_ERROR:
		return -1;
	default:
		snprintf(err, errlen, "%s", why);
		return 1;
	}
}

/* The hello to send, with a fresh credential (munged refuses a replay). */
static unsigned char *make_hello(const struct rdv_params *p, const void *blob, size_t len,
				 size_t *out_len, int *not_yet, char *err, size_t errlen)
{
	char what[256], *cred = NULL;
	unsigned char *hello;
	size_t clen;

	hello_what(p, (unsigned)p->index, what, sizeof what);
	*not_yet = 0;
	switch (rdv_auth_sign(what, blob, len, cred_ttl(p), p->secret_file, &cred, err, errlen)) {
	case 0:
		break;
	case RDV_AUTH_NOT_YET:
		*not_yet = 1; /* launcher 0 has not made the job's secret yet */
		return NULL;
	default:
		return NULL;
	}
	clen = strlen(cred);
	if ((hello = malloc(HELLO_LEN + clen + len))) {
		put32(hello, RDV_MAGIC);
		put32(hello + 4, RDV_VERSION);
		put32(hello + 8, p->job_id);
		put32(hello + 12, p->step_id);
		put32(hello + 16, (uint32_t)p->count);
		put32(hello + 20, (uint32_t)p->index);
		put64(hello + 24, len);
		put32(hello + 32, (uint32_t)clen);
		memcpy(hello + HELLO_LEN, cred, clen);
		if (len)
			memcpy(hello + HELLO_LEN + clen, blob, len);
		*out_len = HELLO_LEN + clen + len;
	} else {
		snprintf(err, errlen, "rendezvous: out of memory for a blob of %zu bytes", len);
	}
	free(cred);
	return hello;
}

static int join(const struct rdv_params *p, const void *blob, size_t len, struct rdv_peer *peers,
		double deadline, char *err, size_t errlen)
{
	double reply_deadline = deadline + REPLY_GRACE;
	char why[1024] = "";

	/* until a trusted answer or the deadline: a refused, dropped or forged
	 * exchange is tried again, as launcher 0 may still be starting */
	while (rdv_now() < deadline) {
		size_t hello_len;
		int not_yet;
		unsigned char *hello = make_hello(p, blob, len, &hello_len, &not_yet, err, errlen);
		enum attempt got = ATTEMPT_AGAIN;
		int fd;

		if (!hello && not_yet) {
			snprintf(why, sizeof why, "%s", err);
			sleep_seconds(0.2);
			continue;
		}
		if (!hello)
			return -1;
		fd = connect_master(p, deadline, err, errlen);
		if (fd < 0) {
			free(hello);
			if (why[0])
				break; /* say what the earlier attempt met, below */
			return -1;
		}
		if (send_all(fd, hello, hello_len, reply_deadline) < 0)
			snprintf(why, sizeof why, "sending the hello: %s", strerror(errno));
		else
			got = read_reply(p, &(struct reply_src){ .fd = fd, .deadline = reply_deadline },
					 peers, why, sizeof why, err, errlen);
		close(fd);
		free(hello);
		if (got == ATTEMPT_TABLE)
			return 0;
		if (got == ATTEMPT_ERROR)
			return -1;
		sleep_seconds(0.2);
	}
	snprintf(err, errlen, "rendezvous: launcher %d: no trusted table from launcher 0 on %s:%u "
		 "within %g s: %s", p->index, p->addr, p->port, p->timeout,
		 why[0] ? why : "no answer");
	return -1;
}

int rdv_tcp_exchange(const struct rdv_params *p, const void *blob, size_t len,
		     struct rdv_peer *peers, double deadline, char *err, size_t errlen)
{
	if (p->port == 0 || p->port > 65535) {
		snprintf(err, errlen, "rendezvous: no valid port (%u) for the tcp rendezvous", p->port);
		return -1;
	}
	if (p->index == 0) {
		if (!(peers[0].blob = rdv_dup(blob, len))) {
			snprintf(err, errlen, "rendezvous: out of memory");
			return -1;
		}
		peers[0].len = len;
		return serve(p, peers, deadline, err, errlen);
	}
	if (!p->addr[0]) {
		snprintf(err, errlen, "rendezvous: launcher %d: no address for launcher 0 (MASTER_ADDR "
			 "or SLURM_STEP_NODELIST)", p->index);
		return -1;
	}
	return join(p, blob, len, peers, deadline, err, errlen);
}
