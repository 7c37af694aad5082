/*
 * disk_writer.c — write-behind: the step thread copies a page into a free
 * slot and goes on; one background thread writes the slots, oldest first.
 * The slots are few and bounded: when none is free the page is not written
 * (counted as dropped; it may still be written when it is evicted) rather
 * than the step waiting for the disk.
 */
#include "disk.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#define WRITER_NICE 10

/* The oldest pending slot, or NULL. Under the lock. */
static kvd_slot *oldest_pending(kv_disk *d)
{
    kvd_slot *best = NULL;
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].state == SLOT_PENDING && (!best || d->slots[i].order < best->order))
            best = &d->slots[i];
    return best;
}

static void write_slot(kv_disk *d, kvd_slot *s)
{
    while (atomic_load(&d->fault) == KV_DISK_FAULT_HOLD)
        usleep(1000);
    char name[96];
    kvd_name(d, s->key, s->n_tokens, name, sizeof name);
    uint64_t bytes = kvd_file_bytes(d, s->n_tokens);
    kv_error e = {0};
    int rc = 0;
    if (d->max_bytes > 0 && bytes > d->max_bytes)
        rc = kv_fail(&e, "a page file of %llu bytes is larger than the disk tier's limit",
                     (unsigned long long)bytes);
    else if (!kvd_exists(d, s->key, s->n_tokens))
        rc = kvd_write(d, s->key, s->tokens, s->n_tokens, s->page, &e);
    if (rc < 0) {
        kvd_note_error(d, e.msg);
        return;
    }
    if (rc == 1) {
        pthread_mutex_lock(&d->mu);
        d->st.writes++;
        d->st.bytes_written += bytes;
        pthread_mutex_unlock(&d->mu);
        kvd_account_write(d, bytes);
    }
}

static void *writer_main(void *arg)
{
    kv_disk *d = arg;
    /* Behind the engine's threads for the CPU: writes are not urgent (a full
     * queue only drops them), a step is. Linux takes a thread's id here. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WRITER_NICE);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        kvd_slot *s = oldest_pending(d);
        if (!s && d->stop)
            break;
        if (!s) {
            pthread_cond_wait(&d->work, &d->mu);
            continue;
        }
        s->state = SLOT_WRITING;
        d->busy = 1;
        pthread_mutex_unlock(&d->mu);
        write_slot(d, s);
        pthread_mutex_lock(&d->mu);
        s->state = SLOT_FREE;
        d->busy = 0;
        d->pending--;
        pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int kvd_writer_start(kv_disk *d, kv_error *err)
{
    d->slots = calloc((size_t)d->n_slots, sizeof *d->slots);
    if (!d->slots)
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for the disk tier's queue");
    /* Signals stay with the threads that wait for them (the server's
     * sigwait): the writer takes none. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&d->thread, NULL, writer_main, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return kv_fail_as(err, KV_ERR_NOMEM, "cannot start the disk tier's writer thread");
    d->started = 1;
    return 0;
}

void kvd_writer_stop(kv_disk *d)
{
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        d->started = 0;
    }
    for (int i = 0; d->slots && i < d->n_slots; i++) {
        free(d->slots[i].tokens);
        free(d->slots[i].page);
    }
    free(d->slots);
    d->slots = NULL;
}

/* Storage for a slot's tokens and page, kept for its next use. */
static int slot_room(kv_disk *d, kvd_slot *s, int n_tokens)
{
    if (!s->page && !(s->page = malloc(d->page_bytes)))
        return -1;
    if (s->tokens_cap < n_tokens) {
        int32_t *t = realloc(s->tokens, (size_t)n_tokens * sizeof *t);
        if (!t)
            return -1;
        s->tokens = t;
        s->tokens_cap = n_tokens;
    }
    return 0;
}

kvd_slot *kvd_slot_take(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens)
{
    kvd_slot *s = NULL;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->n_slots && !s; i++)
        if (d->slots[i].state == SLOT_FREE)
            s = &d->slots[i];
    if (s)
        s->state = SLOT_FILLING;
    else
        d->st.dropped++;
    pthread_mutex_unlock(&d->mu);
    if (!s)
        return NULL;
    if (slot_room(d, s, n_tokens)) {
        kvd_slot_cancel(d, s);
        kvd_count(d, &d->st.dropped, 1);
        return NULL;
    }
    s->key = key;
    s->n_tokens = n_tokens;
    memcpy(s->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    return s;
}

void kvd_slot_submit(kv_disk *d, kvd_slot *s)
{
    pthread_mutex_lock(&d->mu);
    s->state = SLOT_PENDING;
    s->order = d->next_order++;
    d->pending++;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
}

void kvd_slot_cancel(kv_disk *d, kvd_slot *s)
{
    pthread_mutex_lock(&d->mu);
    s->state = SLOT_FREE;
    pthread_mutex_unlock(&d->mu);
}

void kv_disk_flush(kv_disk *d)
{
    pthread_mutex_lock(&d->mu);
    while (d->pending > 0 || d->busy)
        pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}
