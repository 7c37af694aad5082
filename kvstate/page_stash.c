/*
 * page_stash.c — new state pages made ahead, on a thread of their own.
 *
 * A bounded pool creates a page's storage the first time it needs one, and
 * until then the memory was never touched: it must be faulted in before
 * the close of a block writes it. In a step that is a stall with the other
 * threads waiting, and a long one where the machine gives memory slowly:
 * on a 2-vCPU KVM guest (Intel Xeon, transparent huge pages on "madvise")
 * faulting in one 12 MiB page of the 340M shape took 33 ms on huge pages
 * (3.6 ms on 4 KiB ones, which another guest trapped on at every first
 * write: memory.c), a third of a 100 ms step. A fresh server pays it for
 * every block of every prompt until the pool has made its pages, which the
 * step planner then sees as a cost of each block's close.
 *
 * The stash keeps up to `want` pages faulted in ahead and the pool takes
 * them as it grows: a pop under a mutex. It makes them a piece at a time
 * and, while one is still ready, paced (make_page): a refill at once made
 * the step after the take as slow as the fault-in inside it had (the
 * engine's threads fill the cores), paced it is a share of many steps
 * (bench/bench_block_close.c: a close beside a stream 28 ms without the
 * stash, 3-9 ms with it, 2-3 ms on pages long faulted in). The thread makes a page only while
 * the pool could still create one beyond those ready (never past the
 * budget), and only host memory from 2 MiB on gets one (kv_mem_page_slow):
 * smaller pages come from the allocator's reused blocks, device memory has
 * its own. MHLA_STATE_READY_PAGES=N sets want (0: no stash, pages made in
 * the step as before).
 */
#include "kvstate_internal.h"

#include "base.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define READY_DEFAULT 4 /* a step beside decode rows closes one or two blocks */
#define READY_MAX 64
#define PACE 4 /* a paced page takes at most a fifth of a core */

struct kv_stash {
    const kv_pool *pool; /* only its memory hooks and page size, which never change */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thr;
    void *ready[READY_MAX];
    int n_ready, want, making, stop;
    long handed;         /* pages taken ready */
    long created, limit; /* pages the pool made, and may make */
};

/* Room for one more: fewer ready than wanted and the pool could take it. */
static int room(const kv_stash *s)
{
    return s->n_ready + s->making < s->want && s->created + s->n_ready + s->making < s->limit;
}

/* A page faulted in a piece at a time. While another page is ready the pieces are
 * paced, PACE × each piece's time apart: the work is the same, but on a machine whose
 * cores the engine's threads fill it takes a share of many steps, not a third of the
 * next one (measured: a block's close beside a stream took ~22 ms longer with the
 * stash refilling at once, the time of the fault-in itself). With none ready, at once. */
static void *make_page(kv_stash *s)
{
    void *page = kv_mem_alloc_page_unpopulated(s->pool);
    for (int k = 0; page; k++) {
        double t0 = mhla_now();
        if (!kv_mem_populate_piece(s->pool, page, k))
            break;
        pthread_mutex_lock(&s->mu);
        int calm = s->n_ready > 0 && !s->stop;
        pthread_mutex_unlock(&s->mu);
        double pause = calm ? PACE * (mhla_now() - t0) : 0;
        if (pause > 0)
            nanosleep(&(struct timespec){.tv_sec = (time_t)pause,
                                         .tv_nsec = (long)((pause - (double)(time_t)pause) * 1e9)},
                      NULL);
    }
    return page;
}

static void *stash_main(void *arg)
{
    kv_stash *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!room(s)) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        s->making++;
        pthread_mutex_unlock(&s->mu);
        void *page = make_page(s);
        pthread_mutex_lock(&s->mu);
        s->making--;
        if (!page) /* out of memory: the pool's own take reports it, when it comes to it */
            break;
        s->ready[s->n_ready++] = page;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int want_pages(void)
{
    const char *v = getenv("MHLA_STATE_READY_PAGES");
    if (!v || !*v)
        return READY_DEFAULT;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0)
        return READY_DEFAULT;
    return n > READY_MAX ? READY_MAX : (int)n;
}

kv_stash *kv_stash_start(const kv_pool *p, long limit)
{
    int want = want_pages();
    if (want == 0 || limit <= 0 || !kv_mem_page_slow(p))
        return NULL;
    kv_stash *s = calloc(1, sizeof *s);
    if (!s)
        return NULL; /* pages are then made in the step, as without a stash */
    s->pool = p;
    s->want = want;
    s->limit = limit;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thr, NULL, stash_main, s)) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void *kv_stash_take(kv_stash *s)
{
    if (!s)
        return NULL;
    pthread_mutex_lock(&s->mu);
    void *page = s->n_ready > 0 ? s->ready[--s->n_ready] : NULL;
    s->created++; /* the pool makes one either way */
    s->handed += page != NULL;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return page;
}

void kv_stash_untake(kv_stash *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->created--;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void kv_stash_counts(kv_stash *s, int *ready, long *handed)
{
    *ready = 0;
    *handed = 0;
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    *ready = s->n_ready;
    *handed = s->handed;
    pthread_mutex_unlock(&s->mu);
}

void kv_stash_stop(kv_stash *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thr, NULL);
    for (int i = 0; i < s->n_ready; i++)
        kv_mem_release_page(s->pool, s->ready[i]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
