/*
 * disk_loader.c — reads for prefix matches that missed memory, on a thread
 * of their own, so that the engine thread keeps stepping other sequences
 * while a long prefix comes off the disk. Loads are served in the order
 * they came; each reads its blocks in order and stops at the first missing
 * or bad file (what follows it cannot be used: a block's state needs every
 * block before it). The loader runs at the engine's priority, unlike the
 * writer: a request waits for it.
 */
#include "disk.h"

#include <signal.h>
#include <unistd.h>

static void read_blocks(kv_disk *d, kvd_load *l)
{
    int C = l->block_tokens;
    for (int i = 0; i < l->n_blocks && !atomic_load(&l->cancel); i++) {
        while (atomic_load(&d->fault) == KV_DISK_FAULT_HOLD && !atomic_load(&l->cancel))
            usleep(1000);
        int n_tok = (l->first + i + 1) * C;
        kv_mem_populate_page(l->pool, l->pages[i]); /* new pages fault in here, not in a step */
        if (kv_disk_get(d, l->keys[i], l->tokens, n_tok, l->pages[i], NULL) != 1)
            return;
        l->n_read = i + 1;
    }
}

static void *loader_main(void *arg)
{
    kv_disk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        kvd_load *l = d->load_head;
        if (!l && d->load_stop)
            break;
        if (!l) {
            pthread_cond_wait(&d->load_work, &d->mu);
            continue;
        }
        d->load_head = l->next;
        if (!d->load_head)
            d->load_tail = NULL;
        l->state = LOAD_RUNNING;
        pthread_mutex_unlock(&d->mu);
        read_blocks(d, l);
        pthread_mutex_lock(&d->mu);
        l->state = LOAD_DONE;
        pthread_cond_broadcast(&d->load_done);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int kvd_loader_start(kv_disk *d, kv_error *err)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&d->load_thread, NULL, loader_main, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return kv_fail_as(err, KV_ERR_NOMEM, "cannot start the disk tier's loader thread");
    d->load_started = 1;
    return 0;
}

void kvd_loader_stop(kv_disk *d)
{
    if (!d->load_started)
        return;
    pthread_mutex_lock(&d->mu);
    d->load_stop = 1;
    pthread_cond_signal(&d->load_work);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->load_thread, NULL);
    d->load_started = 0;
}

void kvd_load_submit(kv_disk *d, kvd_load *l)
{
    pthread_mutex_lock(&d->mu);
    l->state = LOAD_QUEUED;
    l->next = NULL;
    if (d->load_tail)
        d->load_tail->next = l;
    else
        d->load_head = l;
    d->load_tail = l;
    pthread_cond_signal(&d->load_work);
    pthread_mutex_unlock(&d->mu);
}

int kvd_load_done(kv_disk *d, kvd_load *l, int wait)
{
    pthread_mutex_lock(&d->mu);
    while (wait && l->state != LOAD_DONE)
        pthread_cond_wait(&d->load_done, &d->mu);
    int done = l->state == LOAD_DONE;
    pthread_mutex_unlock(&d->mu);
    return done;
}

/* Unlinks queued load l. Under the lock. */
static void unqueue(kv_disk *d, kvd_load *l)
{
    kvd_load *prev = NULL;
    for (kvd_load *q = d->load_head; q && q != l; q = q->next)
        prev = q;
    if (prev)
        prev->next = l->next;
    else
        d->load_head = l->next;
    if (d->load_tail == l)
        d->load_tail = prev;
    l->state = LOAD_DONE;
}

void kvd_load_cancel(kv_disk *d, kvd_load *l)
{
    atomic_store(&l->cancel, 1);
    pthread_mutex_lock(&d->mu);
    if (l->state == LOAD_QUEUED)
        unqueue(d, l);
    while (l->state != LOAD_DONE)
        pthread_cond_wait(&d->load_done, &d->mu);
    pthread_mutex_unlock(&d->mu);
}
