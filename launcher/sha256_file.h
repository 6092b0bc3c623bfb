/*
 * launcher/sha256_file.h - the SHA-256 of a file (OpenSSL's EVP), for
 * staging's checks and the tokenizer manifests of stork prep.
 */
#ifndef STORK_LAUNCHER_SHA256_FILE_H
#define STORK_LAUNCHER_SHA256_FILE_H

/* The SHA-256 of the file at path as 64 lowercase hex digits. 0 or -1. */
int file_sha256(const char *path, char hex[65]);

#endif
