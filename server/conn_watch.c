/*
 * conn_watch.c — deadlines libmicrohttpd's idle timeout cannot give. A
 * client that trickles a byte now and then (slowloris) is never idle; a
 * completion turns the idle timeout off (the engine may be quiet for
 * longer), so a client that stops reading its answer would hold a thread
 * forever. Every connection is registered here with its phase: from its
 * start, and again from the end of each response (keep-alive), the next
 * request's headers and body must arrive within the read timeout; while the
 * server's own code works on the answer there is no deadline; once it has
 * handed libmicrohttpd something to send (a body, a stream's next events),
 * that must go out within the write timeout. A watchdog thread shuts the
 * socket of a connection past its deadline down (shutdown(2), not close:
 * libmicrohttpd still owns the descriptor, and drops the registration
 * before it closes it), which makes libmicrohttpd's own thread end the
 * connection (a stream's request is then cancelled).
 */
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct srv_watch_conn {
    int fd;
    double since; /* when the current phase started */
    int phase;    /* SRV_WATCH_* */
    int cut;
    struct srv_watch_conn *prev, *next;
};

struct srv_watch {
    double read_timeout_s, write_timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_watch_conn *head;
    int stop;
    pthread_t thr;
};

/* Shuts down the connections past their deadline; w->mu held. */
static void sweep(srv_watch *w)
{
    double now = mhla_now();
    for (srv_watch_conn *c = w->head; c; c = c->next) {
        double limit = c->phase == SRV_WATCH_RECEIVING ? w->read_timeout_s
                       : c->phase == SRV_WATCH_WRITING ? w->write_timeout_s
                                                       : 0;
        if (c->cut || limit <= 0 || now - c->since <= limit)
            continue;
        c->cut = 1;
        shutdown(c->fd, SHUT_RDWR);
        srv_logf(MHLA_LOG_INFO, c->phase == SRV_WATCH_RECEIVING ? "read_timeout" : "write_timeout",
                 "%s within %.0f s: connection closed",
                 c->phase == SRV_WATCH_RECEIVING ? "a request was not received"
                                                 : "the client did not take the answer",
                 limit);
    }
}

static void *watch_main(void *arg)
{
    srv_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        sweep(w);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int srv_watch_start(double read_timeout_s, double write_timeout_s, srv_watch **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    srv_watch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->read_timeout_s = read_timeout_s;
    w->write_timeout_s = write_timeout_s;
    if (pthread_mutex_init(&w->mu, NULL) || pthread_cond_init(&w->cv, NULL) ||
        pthread_create(&w->thr, NULL, watch_main, w)) {
        free(w);
        snprintf(err, errlen, "cannot start the connection watchdog");
        return -1;
    }
    *out = w;
    return 0;
}

void srv_watch_stop(srv_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    while (w->head) {
        srv_watch_conn *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

srv_watch_conn *srv_watch_add(srv_watch *w, int fd)
{
    srv_watch_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL; /* this connection goes without a read deadline */
    c->fd = fd;
    c->since = mhla_now();
    c->phase = SRV_WATCH_RECEIVING;
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head)
        w->head->prev = c;
    w->head = c;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void srv_watch_remove(srv_watch *w, srv_watch_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&w->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&w->mu);
    free(c);
}

void srv_watch_phase(srv_watch *w, srv_watch_conn *c, int phase)
{
    if (!c)
        return;
    pthread_mutex_lock(&w->mu);
    c->phase = phase;
    c->since = mhla_now();
    pthread_mutex_unlock(&w->mu);
}
