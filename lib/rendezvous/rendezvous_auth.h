/*
 * lib/rendezvous/rendezvous_auth.h - credentials for the TCP rendezvous, from Slurm's
 * own authentication service, munge.
 *
 * A launcher's hello and launcher 0's reply each carry a munge credential
 * whose payload names what the message is ("hello job=J step=S port=P
 * count=C index=I") and the SHA-256 of the bytes it vouches for (the blob,
 * the table). munged signs it with the cluster's key and the sender's uid;
 * the receiver's munged checks the signature, the time to live and that
 * the credential was not seen before (a replay). A receiver accepts only a
 * credential of its own uid, the job's user, whose payload is exactly the
 * one it expects: another user of the nodes, who can connect to the port
 * and knows the job and step ids, cannot make one.
 *
 * munged's socket is Slurm's (slurm.conf's AuthInfo=socket=PATH, the file
 * SLURM_CONF names), else munge's default.
 *
 * Where munged does not answer, a secret of the job stands in: secret_file
 * (a regular file of this uid, mode 0600, no link, 32 bytes or more;
 * refused otherwise, naming it) keys an HMAC-SHA256 of the same payload
 * ("STORK-HMAC1:HEX:PAYLOAD"). It proves knowledge of a file only the
 * job's user can read; it does not stop a replay of a captured message,
 * which binds the same fields and hash and so can only repeat itself.
 */
#ifndef STORK_RENDEZVOUS_AUTH_H
#define STORK_RENDEZVOUS_AUTH_H

#include <stddef.h>

/* The largest credential accepted on the wire (munge's are ~150-400 bytes). */
#define RDV_CRED_MAX 4096

/*
 * A credential for what and the SHA-256 of data[0..len), valid for ttl
 * seconds: *cred (malloc'd, NUL-terminated). 0, or -1 with munge's reason
 * in err (munged not running, ...).
 */
int rdv_auth_sign(const char *what, const void *data, size_t len, int ttl,
		  const char *secret_file, char **cred, char *err, size_t errlen);

/* rdv_auth_sign's answer when munged is absent and the secret file is not
 * there yet (launcher 0 makes it): try again. */
#define RDV_AUTH_NOT_YET (-2)

/*
 * Whether cred (credlen bytes, not NUL-terminated) vouches for exactly what
 * and data, signed for this process's uid. 0, or -1 with the reason in err
 * ("signed by uid 1001, not ours", "replayed", "for another message", ...).
 */
int rdv_auth_verify(const char *cred, size_t credlen, const char *what, const void *data,
		    size_t len, const char *secret_file, char *err, size_t errlen);

/*
 * The first half of rdv_auth_verify, before the data has arrived: cred is
 * valid, ours, and for what (its hash is kept in *digest, 65 bytes, for
 * rdv_auth_check_data). Decoding uses the credential up: call once.
 */
int rdv_auth_verify_what(const char *cred, size_t credlen, const char *what,
			 const char *secret_file, char *digest, char *err, size_t errlen);

/*
 * Make the job's secret at path (32 random bytes, mode 0600, O_EXCL: an
 * existing file is left for rdv_auth to judge). 0, or -1 with a message.
 */
int rdv_auth_make_secret(const char *path, char *err, size_t errlen);

/* Whether data has the hash rdv_auth_verify_what kept. */
int rdv_auth_check_data(const char *digest, const void *data, size_t len);

#endif
