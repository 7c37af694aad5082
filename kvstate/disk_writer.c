/*
 * disk_writer.c — write-behind: the step thread queues a page in a free slot
 * and goes on; one background thread writes the slots, oldest first, in
 * batches (every slot waiting when it wakes). A host page is written from
 * the pool's storage, pinned until its file is placed; the step thread
 * copies nothing. The slots are few and bounded: when none is free the page
 * is not written (counted as dropped; it may still be written when it is
 * evicted) rather than the step waiting for the disk.
 */
#include "disk.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#define WRITER_NICE 10

/* The pending slots into batch, oldest first, marked as being written;
 * their count. Under the lock. */
static int take_batch(kv_disk *d, kvd_slot **batch)
{
    int n = 0;
    for (;;) {
        kvd_slot *best = NULL;
        for (int i = 0; i < d->n_slots; i++)
            if (d->slots[i].state == SLOT_PENDING && (!best || d->slots[i].order < best->order))
                best = &d->slots[i];
        if (!best)
            return n;
        best->state = SLOT_WRITING;
        batch[n++] = best;
    }
}

/* 1: the slot's file is to be written; 0: it is there already or too big
 * (counted). */
static int wanted(kv_disk *d, const kvd_slot *s)
{
    uint64_t bytes = kvd_file_bytes(d, s->n_tokens);
    if (d->max_bytes > 0 && bytes > d->max_bytes) {
        kv_error e;
        kv_fail(&e, "a page file of %llu bytes is larger than the disk tier's limit",
                (unsigned long long)bytes);
        kvd_note_error(d, e.msg);
        return 0;
    }
    return !kvd_exists(d, s->key, s->n_tokens);
}

static void counted(kv_disk *d, const kvd_slot *s, int rc, const kv_error *e)
{
    if (rc < 0) {
        kvd_note_error(d, e->msg);
        return;
    }
    if (rc == 1) {
        uint64_t bytes = kvd_file_bytes(d, s->n_tokens);
        pthread_mutex_lock(&d->mu);
        d->st.writes++;
        d->st.bytes_written += bytes;
        pthread_mutex_unlock(&d->mu);
        kvd_account_write(d, bytes);
    }
}

/* Every temporary first, then each synced and placed, then one directory
 * sync: the file system commits the batch's metadata together. */
static void write_batch(kv_disk *d, kvd_slot **batch, int n)
{
    kvd_temp *t = d->temps;
    for (int i = 0; i < n; i++) {
        kv_error e = {0};
        t[i].fd = -1;
        if (!wanted(d, batch[i]))
            continue;
        if (kvd_temp_write(d, batch[i]->key, batch[i]->tokens, batch[i]->n_tokens, batch[i]->page,
                           &t[i], &e))
            counted(d, batch[i], -1, &e);
    }
    int placed = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].fd < 0)
            continue;
        kv_error e = {0};
        int rc = kvd_temp_place(d, &t[i], &e);
        placed += rc == 1;
        counted(d, batch[i], rc, &e);
    }
    if (placed)
        kvd_sync_dir(d);
}

static void write_each(kv_disk *d, kvd_slot **batch, int n)
{
    for (int i = 0; i < n; i++) {
        kv_error e = {0};
        if (wanted(d, batch[i]))
            counted(d, batch[i],
                    kvd_write(d, batch[i]->key, batch[i]->tokens, batch[i]->n_tokens,
                              batch[i]->page, &e),
                    &e);
    }
}

/* The batch's slots free again, their pages unpinned. Under the lock. */
static void release_batch(kv_disk *d, kvd_slot **batch, int n)
{
    for (int i = 0; i < n; i++) {
        if (batch[i]->pin)
            atomic_store(batch[i]->pin, 0);
        batch[i]->pin = NULL;
        batch[i]->state = SLOT_FREE;
    }
    d->pending -= n;
    d->busy = 0;
    pthread_cond_broadcast(&d->idle);
}

static void *writer_main(void *arg)
{
    kv_disk *d = arg;
    kvd_slot **batch = d->batch;
    /* Behind the engine's threads for the CPU: writes are not urgent (a full
     * queue only drops them), a step is. Linux takes a thread's id here. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WRITER_NICE);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        if (atomic_load(&d->fault) == KV_DISK_FAULT_HOLD && !d->stop) {
            pthread_mutex_unlock(&d->mu);
            usleep(1000);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        int n = take_batch(d, batch);
        if (!n && d->stop)
            break;
        if (!n) {
            pthread_cond_wait(&d->work, &d->mu);
            continue;
        }
        d->busy = 1;
        pthread_mutex_unlock(&d->mu);
        if (d->sync_each)
            write_each(d, batch, n);
        else
            write_batch(d, batch, n);
        pthread_mutex_lock(&d->mu);
        release_batch(d, batch, n);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int kvd_writer_start(kv_disk *d, kv_error *err)
{
    d->slots = calloc((size_t)d->n_slots, sizeof *d->slots);
    d->batch = calloc((size_t)d->n_slots, sizeof *d->batch);
    d->temps = calloc((size_t)d->n_slots, sizeof *d->temps);
    if (!d->slots || !d->batch || !d->temps)
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

/* Writes what is queued (a held writer lets go), then frees the queue. */
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
        free(d->slots[i].copy);
    }
    free(d->slots);
    free(d->batch);
    free(d->temps);
    d->slots = NULL;
    d->batch = NULL;
    d->temps = NULL;
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
    if (s->tokens_cap < n_tokens) {
        int32_t *t = realloc(s->tokens, (size_t)n_tokens * sizeof *t);
        if (!t) {
            kvd_slot_cancel(d, s);
            kvd_count(d, &d->st.dropped, 1);
            return NULL;
        }
        s->tokens = t;
        s->tokens_cap = n_tokens;
    }
    s->key = key;
    s->n_tokens = n_tokens;
    s->page = NULL;
    s->pin = NULL;
    memcpy(s->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    return s;
}

void kvd_slot_pin(kvd_slot *s, const void *page, atomic_int *pin)
{
    atomic_store(pin, 1);
    s->page = page;
    s->pin = pin;
}

int kvd_slot_copy_room(kv_disk *d, kvd_slot *s)
{
    if (!s->copy && !(s->copy = malloc(d->page_bytes)))
        return -1;
    s->page = s->copy;
    s->pin = NULL;
    return 0;
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
    s->pin = NULL;
    pthread_mutex_unlock(&d->mu);
}

/* The pending slot writing from pin's page, or NULL. Under the lock. */
static kvd_slot *pending_with(kv_disk *d, const atomic_int *pin)
{
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].pin == pin && d->slots[i].state == SLOT_PENDING)
            return &d->slots[i];
    return NULL;
}

void kvd_unpin(kv_disk *d, atomic_int *pin)
{
    pthread_mutex_lock(&d->mu);
    while (atomic_load(pin)) {
        kvd_slot *s = pending_with(d, pin);
        const void *page = s ? s->page : NULL;
        if (s && kvd_slot_copy_room(d, s) == 0) {
            memcpy(s->copy, page, d->page_bytes);
            atomic_store(pin, 0);
            d->st.copied++;
            break;
        }
        if (s) { /* no memory for a copy: its write, then */
            s->page = page;
            s->pin = pin;
        }
        pthread_cond_wait(&d->idle, &d->mu);
    }
    pthread_mutex_unlock(&d->mu);
}

void kv_disk_flush(kv_disk *d)
{
    pthread_mutex_lock(&d->mu);
    while (d->pending > 0 || d->busy)
        pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}
