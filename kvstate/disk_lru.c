/*
 * disk_lru.c — the disk tier's size: page files are counted when the tier
 * opens and after each write; past --state-disk-max the least recently used
 * files (by modification time, which a read refreshes, so replicas sharing
 * the directory share one order) are removed until the tier is a tenth
 * below the limit. Temporaries a killed writer left behind are removed once
 * they are old enough that no live writer can still be filling them.
 */
#include "disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A writer fills and renames a temporary in well under this. */
#define STALE_TMP_S (15 * 60)

typedef struct {
    struct timespec mtime;
    uint64_t bytes;
    char name[96];
} lru_file;

typedef struct {
    lru_file *f;
    size_t n, cap;
    uint64_t total;
} lru_list;

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void add_file(lru_list *l, const char *name, const struct stat *sb)
{
    l->total += (uint64_t)sb->st_size;
    if (strlen(name) >= sizeof l->f[0].name)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        lru_file *nf = realloc(l->f, cap * sizeof *nf);
        if (!nf)
            return; /* counted, not evictable this time */
        l->f = nf;
        l->cap = cap;
    }
    lru_file *f = &l->f[l->n++];
    f->mtime = sb->st_mtim;
    f->bytes = (uint64_t)sb->st_size;
    strcpy(f->name, name);
}

/* Every page file into l; stale temporaries removed. */
static void list_files(kv_disk *d, lru_list *l)
{
    int fd = dup(d->dir_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(dir);
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(dir));) {
        struct stat sb;
        if (fstatat(d->dir_fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
            continue;
        if (strncmp(e->d_name, KVD_TMP_PREFIX, strlen(KVD_TMP_PREFIX)) == 0) {
            if (now - sb.st_mtime > STALE_TMP_S)
                (void)unlinkat(d->dir_fd, e->d_name, 0);
        } else if (ends_with(e->d_name, KVD_SUFFIX)) {
            add_file(l, e->d_name, &sb);
        }
    }
    closedir(dir);
}

static int older_first(const void *a, const void *b)
{
    const lru_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

void kvd_scan(kv_disk *d)
{
    lru_list l = {0};
    list_files(d, &l);
    free(l.f);
    pthread_mutex_lock(&d->mu);
    d->st.bytes = l.total;
    pthread_mutex_unlock(&d->mu);
}

static void evict(kv_disk *d)
{
    lru_list l = {0};
    list_files(d, &l);
    qsort(l.f, l.n, sizeof *l.f, older_first);
    uint64_t goal = d->max_bytes - d->max_bytes / 10, removed = 0;
    for (size_t i = 0; i < l.n && l.total > goal; i++) {
        if (unlinkat(d->dir_fd, l.f[i].name, 0) == 0) {
            l.total -= l.f[i].bytes;
            removed++;
        }
    }
    free(l.f);
    pthread_mutex_lock(&d->mu);
    d->st.bytes = l.total;
    d->st.evictions += removed;
    pthread_mutex_unlock(&d->mu);
}

void kvd_account_write(kv_disk *d, uint64_t bytes)
{
    pthread_mutex_lock(&d->mu);
    d->st.bytes += bytes;
    int over = d->max_bytes > 0 && d->st.bytes > d->max_bytes;
    pthread_mutex_unlock(&d->mu);
    if (over)
        evict(d);
}
