/*
 * t/integration/rdv_attack.c - another user of the nodes against a job's
 * TCP rendezvous, for t/integration/rendezvous.bats.
 *
 *   rdv_attack HOST PORT JOB STEP COUNT INDEX
 *
 * connects to launcher 0 at HOST:PORT and sends a well-formed hello for
 * launcher INDEX of job JOB step STEP (COUNT launchers) with a blob of its
 * own and a munge credential of its own (the uid it runs as), as anyone
 * who reads squeue can. It prints what launcher 0 answered: "refused:
 * MESSAGE" (exit 0), "accepted: a table of N launchers" (exit 1), or
 * "closed without a reply" (exit 0).
 *
 *   rdv_attack --reply PORT JOB STEP COUNT SECONDS
 *
 * holds launcher 0's port (on 127.0.0.1) for SECONDS before launcher 0
 * takes it, and answers every hello with a forged table of COUNT blobs,
 * credentialed by munge for the uid it runs as; it prints "answered N
 * hello(s)".
 *
 *   rdv_attack --flood HOST PORT CONNECTIONS SECONDS
 *
 * holds CONNECTIONS connections open at HOST:PORT for SECONDS, sending
 * nothing, and opens each again as soon as launcher 0 closes it; it prints
 * "held N at once, opened M in all".
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <munge.h>
#include <netdb.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void put32(unsigned char *b, uint32_t v)
{
	v = htonl(v);
	memcpy(b, &v, 4);
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v;

	memcpy(&v, b, 4);
	return ntohl(v);
}

static void put64(unsigned char *b, uint64_t v)
{
	put32(b, (uint32_t)(v >> 32));
	put32(b + 4, (uint32_t)v);
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* A forged table for every hello that comes within seconds. */
static int forge_replies(char **argv)
{
	unsigned count = (unsigned)atoi(argv[5]), port = (unsigned)atoi(argv[2]);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), answered = 0;
	time_t end = time(NULL) + atoi(argv[6]);
	unsigned char table[4096], out[8192], in[8192];
	size_t tlen = 0;

	for (unsigned i = 0; i < count; i++) {
		static const char evil[] = "forged";

		put64(table + tlen, sizeof evil);
		memcpy(table + tlen + 8, evil, sizeof evil);
		tlen += 8 + sizeof evil;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 16) < 0) {
		perror("rdv_attack: bind");
		return 2;
	}
	while (time(NULL) < end) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		char payload[512], hex[65], *cred = NULL;
		munge_ctx_t ctx = munge_ctx_create();
		size_t clen;
		int fd;

		if (getenv("MUNGE_SOCKET"))
			munge_ctx_set(ctx, MUNGE_OPT_SOCKET, getenv("MUNGE_SOCKET"));
		if (poll(&pfd, 1, 200) <= 0 || (fd = accept(lfd, NULL, NULL)) < 0) {
			munge_ctx_destroy(ctx);
			continue;
		}
		(void)recv(fd, in, sizeof in, 0);
		sha256_hex(table, tlen, hex);
		snprintf(payload, sizeof payload, "stork-rendezvous table job=%s step=%s port=%s "
			 "count=%s index=%u sha256=%s", argv[3], argv[4], argv[2], argv[5],
			 get32(in + 20), hex);
		if (munge_encode(&cred, ctx, payload, (int)strlen(payload) + 1) == EMUNGE_SUCCESS) {
			clen = strlen(cred);
			put32(out, 0x53524456u);
			put32(out + 4, 2);
			put32(out + 8, 0);
			put32(out + 12, count);
			put32(out + 16, (uint32_t)clen);
			put64(out + 20, tlen);
			memcpy(out + 28, cred, clen);
			memcpy(out + 28 + clen, table, tlen);
			if (send(fd, out, 28 + clen + tlen, MSG_NOSIGNAL) > 0)
				answered++;
		}
		free(cred);
		munge_ctx_destroy(ctx);
		close(fd);
	}
	close(lfd);
	printf("answered %d hello(s)\n", answered);
	return 0;
}

/* A connection to ai that sends nothing; -1 while it cannot be made. */
static int silent_connection(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* CONNECTIONS silent connections, kept open for SECONDS. */
static int flood(char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int n = atoi(argv[4]), held = 0, most = 0;
	long opened = 0;
	time_t end = time(NULL) + atoi(argv[5]);
	struct rlimit rl;
	struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 16) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!pfd || getaddrinfo(argv[2], argv[3], &hints, &ai) != 0) {
		fprintf(stderr, "rdv_attack: cannot resolve %s\n", argv[2]);
		return 2;
	}
	for (int i = 0; i < n; i++)
		pfd[i].fd = -1;
	while (time(NULL) < end) {
		held = 0;
		for (int i = 0; i < n; i++) {
			char b[64];

			if (pfd[i].fd >= 0 && (!pfd[i].revents || recv(pfd[i].fd, b, sizeof b, MSG_DONTWAIT) > 0)) {
				held++;
				continue;
			}
			if (pfd[i].fd >= 0)
				close(pfd[i].fd);
			pfd[i] = (struct pollfd){ .fd = silent_connection(ai), .events = POLLIN };
			if (pfd[i].fd >= 0) {
				opened++;
				held++;
			}
		}
		if (held > most)
			most = held;
		poll(pfd, (nfds_t)n, 5);
	}
	printf("held %d at once, opened %ld in all\n", most, opened);
	return 0;
}

int main(int argc, char **argv)
{
	static const char blob[] = "a blob of the attacker's";
	unsigned char hello[8192], reply[8192];
	char payload[512], hex[65], *cred = NULL;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	munge_ctx_t ctx = munge_ctx_create();
	const char *sock = getenv("MUNGE_SOCKET");
	size_t clen, have = 0;
	ssize_t n;
	int fd;

	if (argc == 7 && !strcmp(argv[1], "--reply"))
		return forge_replies(argv);
	if (argc == 6 && !strcmp(argv[1], "--flood"))
		return flood(argv);
	if (argc != 7) {
		fprintf(stderr, "usage: rdv_attack HOST PORT JOB STEP COUNT INDEX\n"
				"       rdv_attack --reply PORT JOB STEP COUNT SECONDS\n"
				"       rdv_attack --flood HOST PORT CONNECTIONS SECONDS\n");
		return 2;
	}
	if (sock)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock);
	sha256_hex(blob, sizeof blob, hex);
	snprintf(payload, sizeof payload, "stork-rendezvous hello job=%s step=%s port=%s count=%s "
		 "index=%s sha256=%s", argv[3], argv[4], argv[2], argv[5], argv[6], hex);
	if (munge_encode(&cred, ctx, payload, (int)strlen(payload) + 1) != EMUNGE_SUCCESS) {
		fprintf(stderr, "rdv_attack: munge: %s\n", munge_ctx_strerror(ctx));
		return 2;
	}
	clen = strlen(cred);
	put32(hello, 0x53524456u);
	put32(hello + 4, 2);
	put32(hello + 8, (uint32_t)atol(argv[3]));
	put32(hello + 12, (uint32_t)atol(argv[4]));
	put32(hello + 16, (uint32_t)atol(argv[5]));
	put32(hello + 20, (uint32_t)atol(argv[6]));
	put32(hello + 24, 0);
	put32(hello + 28, sizeof blob);
	put32(hello + 32, (uint32_t)clen);
	memcpy(hello + 36, cred, clen);
	memcpy(hello + 36 + clen, blob, sizeof blob);
	if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0 ||
	    (fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("rdv_attack: connect");
		return 2;
	}
	if (send(fd, hello, 36 + clen + sizeof blob, 0) < 0) {
		perror("rdv_attack: send");
		return 2;
	}
	while (have < sizeof reply - 1 && (n = recv(fd, reply + have, sizeof reply - 1 - have, 0)) > 0)
		have += (size_t)n;
	close(fd);
	if (have < 28) {
		printf("closed without a reply\n");
		return 0;
	}
	if (get32(reply + 8) != 0) {
		reply[have] = '\0';
		printf("refused: %s\n", (char *)reply + 28 + get32(reply + 16));
		return 0;
	}
	printf("accepted: a table of %u launchers\n", get32(reply + 12));
	return 1;
}
