/*
 * disk_tier.c — the disk tier as an object: its directory, its counters,
 * the fault hook, and the synchronous put and get the pool and the tests
 * use (the pool's writes go through disk_writer.c).
 */
#include "disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t kvd_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void kvd_count(kv_disk *d, uint64_t *counter, uint64_t n)
{
    pthread_mutex_lock(&d->mu);
    *counter += n;
    pthread_mutex_unlock(&d->mu);
}

void kvd_note_error(kv_disk *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    d->st.write_errors++;
    size_t n = strnlen(msg, sizeof d->st.last_error - 1); /* the start says enough */
    memcpy(d->st.last_error, msg, n);
    d->st.last_error[n] = 0;
    pthread_mutex_unlock(&d->mu);
}

void kvd_name(const kv_disk *d, uint64_t key, int n_tokens, char *buf, size_t len)
{
    snprintf(buf, len, "%016llx-%016llx-%d" KVD_SUFFIX, (unsigned long long)d->fingerprint,
             (unsigned long long)key, n_tokens);
}

int kvd_exists(const kv_disk *d, uint64_t key, int n_tokens)
{
    char name[96];
    struct stat sb;
    kvd_name(d, key, n_tokens, name, sizeof name);
    return fstatat(d->dir_fd, name, &sb, 0) == 0;
}

int kv_disk_path(const kv_disk *d, uint64_t key, int n_tokens, char *buf, size_t len)
{
    char name[96];
    kvd_name(d, key, n_tokens, name, sizeof name);
    return snprintf(buf, len, "%s/%s", d->dir, name) < (int)len ? 0 : -1;
}

/* 16 MiB to 256 MiB of copies waiting, and at least 4 pages. */
static int queue_slots(const kv_disk_options *opt, size_t page_bytes)
{
    if (opt->queue_slots > 0)
        return opt->queue_slots > 1024 ? 1024 : opt->queue_slots;
    size_t n = ((size_t)256 << 20) / page_bytes;
    return n < 4 ? 4 : n > 64 ? 64 : (int)n;
}

static int open_dir(kv_disk *d, const char *dir, kv_error *err)
{
    if (mkdir(dir, 0755) && errno != EEXIST)
        return kv_fail_as(err, KV_ERR_IO, "state dir '%s': cannot create it: %s", dir,
                          strerror(errno));
    d->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dir_fd < 0)
        return kv_fail_as(err, KV_ERR_IO, "state dir '%s': cannot open it: %s", dir,
                          strerror(errno));
    if (faccessat(d->dir_fd, ".", W_OK, AT_EACCESS))
        kvd_note_error(d, "the state dir is not writable: pages are read, never written");
    return 0;
}

int kv_disk_open(const kv_disk_options *opt, const kv_geometry *geo, kv_dtype dtype, kv_disk **out,
                 kv_error *err)
{
    *out = NULL;
    if (!opt || !opt->dir || !opt->dir[0])
        return kv_fail(err, "state dir: no directory given");
    kv_disk *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(opt->dir))) {
        free(d);
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for the disk tier");
    }
    d->dir_fd = -1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->idle, NULL);
    pthread_cond_init(&d->load_work, NULL);
    pthread_cond_init(&d->load_done, NULL);
    d->max_bytes = opt->max_bytes;
    d->fingerprint = opt->fingerprint;
    d->geo = *geo;
    d->dtype = dtype;
    d->page_bytes = kv_page_floats(geo) * (dtype == KV_DTYPE_BF16 ? 2 : 4);
    d->n_slots = queue_slots(opt, d->page_bytes);
    d->sync_each = opt->sync_each;
    if (getrandom(&d->tmp_id, sizeof d->tmp_id, 0) != sizeof d->tmp_id)
        d->tmp_id = kvd_now_ns() ^ (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)d;
    if (open_dir(d, opt->dir, err) || kvd_writer_start(d, err) || kvd_loader_start(d, err)) {
        kv_disk_close(d);
        return -1;
    }
    kvd_scan(d);
    *out = d;
    return 0;
}

void kv_disk_close(kv_disk *d)
{
    if (!d)
        return;
    kvd_loader_stop(d);
    kvd_writer_stop(d);
    if (d->dir_fd >= 0)
        close(d->dir_fd);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->idle);
    pthread_cond_destroy(&d->load_work);
    pthread_cond_destroy(&d->load_done);
    free(d->dir);
    free(d);
}

void kv_disk_stats_get(kv_disk *d, kv_disk_stats *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    pthread_mutex_unlock(&d->mu);
}

void kv_disk_set_fault(kv_disk *d, kv_disk_fault fault) { atomic_store(&d->fault, (int)fault); }

int kv_disk_put(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
                kv_error *err)
{
    if (n_tokens <= 0 || !tokens || !page)
        return kv_fail(err, "disk tier: nothing to write");
    int rc = kvd_write(d, key, tokens, n_tokens, page, err);
    if (rc < 0) {
        kvd_note_error(d, err ? err->msg : "write failed");
        return -1;
    }
    if (rc == 1) {
        uint64_t bytes = kvd_file_bytes(d, n_tokens);
        pthread_mutex_lock(&d->mu);
        d->st.writes++;
        d->st.bytes_written += bytes;
        pthread_mutex_unlock(&d->mu);
        kvd_account_write(d, bytes);
    }
    return 0;
}

int kv_disk_get(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, void *page,
                kv_error *err)
{
    kv_error local;
    if (!err)
        err = &local;
    err->msg[0] = 0;
    if (n_tokens <= 0 || !tokens || !page)
        return kv_fail(err, "disk tier: nothing to read");
    uint64_t t0 = kvd_now_ns();
    int rc = kvd_read(d, key, tokens, n_tokens, page, err);
    pthread_mutex_lock(&d->mu);
    if (rc == 1) {
        d->st.hits++;
        d->st.bytes_read += kvd_file_bytes(d, n_tokens);
        d->st.load_ns += kvd_now_ns() - t0;
    } else {
        d->st.misses++;
        d->st.corrupt += rc == -1;
    }
    pthread_mutex_unlock(&d->mu);
    return rc == 1 ? 1 : 0;
}
