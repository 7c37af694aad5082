/*
 * disk_file.c — one page file written and read. A writer fills a temporary
 * of its own, syncs it, and links it under the final name only if no file
 * is there (first complete writer wins; the copies are the same bits
 * anyway), then syncs the directory: a reader never opens a partial file,
 * even after a crash or kill -9. A reader checks the size, the header, the
 * tokens and the checksum before it reports a page.
 */
#define _GNU_SOURCE
#include "disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static int write_all(int fd, const void *buf, size_t n)
{
    const char *b = buf;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
    char *b = buf;
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The file's bytes into fd; the fault hook cuts it half-way. */
static int write_body(kv_disk *d, int fd, const kvd_header *h, const int32_t *tokens,
                      const void *page)
{
    size_t tb = (size_t)h->n_tokens * sizeof *tokens;
    XXH64_hash_t sum;
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return -1;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, sizeof *h);
    XXH3_64bits_update(st, tokens, tb);
    XXH3_64bits_update(st, page, d->page_bytes);
    sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    int fault = atomic_load(&d->fault);
    if (fault == KV_DISK_FAULT_ENOSPC || fault == KV_DISK_FAULT_TORN) {
        (void)write_all(fd, h, sizeof *h);
        (void)write_all(fd, tokens, tb);
        (void)write_all(fd, page, d->page_bytes / 2);
        errno = ENOSPC;
        return -1;
    }
    if (write_all(fd, h, sizeof *h) || write_all(fd, tokens, tb) ||
        write_all(fd, page, d->page_bytes) || write_all(fd, &sum, sizeof sum))
        return -1;
    return 0;
}

/* The temporary into place unless a file is there: 1 placed, 0 one was there. */
static int place(kv_disk *d, const char *tmp, const char *name)
{
    if (renameat2(d->dir_fd, tmp, d->dir_fd, name, RENAME_NOREPLACE) == 0)
        return 1;
    if (errno == EEXIST) {
        (void)unlinkat(d->dir_fd, tmp, 0);
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return -1;
    /* a filesystem without RENAME_NOREPLACE: a plain rename, the same bits */
    return renameat(d->dir_fd, tmp, d->dir_fd, name) == 0 ? 1 : -1;
}

int kvd_temp_write(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
                   kvd_temp *t, kv_error *err)
{
    kvd_name(d, key, n_tokens, t->name, sizeof t->name);
    /* pids repeat across containers sharing a volume: the tier's random id does not */
    snprintf(t->tmp, sizeof t->tmp, KVD_TMP_PREFIX "%s-%016llx-%lu", t->name,
             (unsigned long long)d->tmp_id, (unsigned long)atomic_fetch_add(&d->tmp_counter, 1));
    kvd_header h;
    kvd_header_fill(d, key, n_tokens, &h);
    t->fd = atomic_load(&d->fault) == KV_DISK_FAULT_READONLY
                ? (errno = EROFS, -1)
                : openat(d->dir_fd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (t->fd < 0)
        return kv_fail_as(err, KV_ERR_IO, "cannot create '%s/%s': %s", d->dir, t->tmp,
                          strerror(errno));
    if (write_body(d, t->fd, &h, tokens, page) == 0)
        return 0;
    int e = errno;
    close(t->fd);
    t->fd = -1;
    if (atomic_load(&d->fault) != KV_DISK_FAULT_TORN)
        (void)unlinkat(d->dir_fd, t->tmp, 0);
    return kv_fail_as(err, KV_ERR_IO, "writing '%s/%s' failed: %s", d->dir, t->tmp, strerror(e));
}

int kvd_temp_place(kv_disk *d, kvd_temp *t, kv_error *err)
{
    int bad = fsync(t->fd);
    int e = errno;
    if (close(t->fd) && !bad) {
        bad = 1;
        e = errno;
    }
    t->fd = -1;
    int rc = bad ? -1 : place(d, t->tmp, t->name);
    if (rc < 0) {
        e = bad ? e : errno;
        (void)unlinkat(d->dir_fd, t->tmp, 0);
        return kv_fail_as(err, KV_ERR_IO, "%s '%s/%s' failed: %s", bad ? "syncing" : "renaming",
                          d->dir, t->tmp, strerror(e));
    }
    return rc;
}

/* The renames themselves survive a crash. */
void kvd_sync_dir(kv_disk *d) { (void)fsync(d->dir_fd); }

int kvd_write(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
              kv_error *err)
{
    kvd_temp t;
    if (kvd_temp_write(d, key, tokens, n_tokens, page, &t, err))
        return -1;
    int rc = kvd_temp_place(d, &t, err);
    if (rc == 1)
        kvd_sync_dir(d);
    return rc;
}

/* The header and the tokens of an open file of the right size: 0, or -1
 * with err. */
static int read_head(kv_disk *d, int fd, uint64_t key, const int32_t *tokens, int n_tokens,
                     int32_t *got, XXH3_state_t *st, kv_error *err)
{
    kvd_header h;
    if (read_all(fd, &h, sizeof h))
        return kv_fail_as(err, KV_ERR_IO, "short read of the header");
    if (kvd_header_check(d, &h, key, n_tokens, err))
        return -1;
    size_t tb = (size_t)n_tokens * sizeof *tokens;
    if (read_all(fd, got, tb))
        return kv_fail_as(err, KV_ERR_IO, "short read of the tokens");
    XXH3_64bits_update(st, &h, sizeof h);
    XXH3_64bits_update(st, got, tb);
    return 0;
}

/* Everything after the open: size, header, tokens, page, checksum. */
static int read_checked(kv_disk *d, int fd, uint64_t key, const int32_t *tokens, int n_tokens,
                        void *page, kv_error *err)
{
    struct stat sb;
    if (fstat(fd, &sb))
        return kv_fail_as(err, KV_ERR_IO, "fstat failed: %s", strerror(errno));
    uint64_t want = kvd_file_bytes(d, n_tokens);
    if ((uint64_t)sb.st_size != want)
        return kv_fail(err, "%lld bytes, a valid file has %llu (truncated or padded)",
                       (long long)sb.st_size, (unsigned long long)want);
    int32_t *got = malloc((size_t)n_tokens * sizeof *got + 1);
    XXH3_state_t *st = XXH3_createState();
    int rc = !got || !st ? kv_fail_as(err, KV_ERR_NOMEM, "out of memory") : 0;
    if (rc == 0) {
        XXH3_64bits_reset(st);
        rc = read_head(d, fd, key, tokens, n_tokens, got, st, err);
    }
    uint64_t sum = 0;
    if (rc == 0 && (read_all(fd, page, d->page_bytes) || read_all(fd, &sum, sizeof sum)))
        rc = kv_fail_as(err, KV_ERR_IO, "short read of the page");
    if (rc == 0) {
        XXH3_64bits_update(st, page, d->page_bytes);
        if (XXH3_64bits_digest(st) != sum)
            rc = kv_fail(err, "checksum mismatch (corrupt file)");
        else if (memcmp(got, tokens, (size_t)n_tokens * sizeof *tokens) != 0)
            rc = -2; /* a sound file for other tokens: a 64-bit key collision */
    }
    free(got);
    XXH3_freeState(st);
    return rc;
}

int kvd_read(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, void *page,
             kv_error *err)
{
    char name[96];
    kvd_name(d, key, n_tokens, name, sizeof name);
    int fd = openat(d->dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int rc = read_checked(d, fd, key, tokens, n_tokens, page, err);
    if (rc == 0)
        (void)futimens(fd, NULL); /* recently used, for every replica's LRU */
    close(fd);
    if (rc == -1) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        kv_fail(err, "'%s/%s': %s", d->dir, name, why);
        (void)unlinkat(d->dir_fd, name, 0);
    }
    return rc == 0 ? 1 : rc;
}
