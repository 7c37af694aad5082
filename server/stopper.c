/*
 * stopper.c — stop strings with hold-back: text that could still turn into a
 * stop string is kept back, so no part of a stop string is ever emitted.
 * Input is whole UTF-8 characters, and a held-back suffix always starts
 * where a stop string starts, so emitted text stays whole characters too.
 */
#include "server_internal.h"

#include <string.h>

void srv_stopper_init(srv_stopper *s, char **stops, int n_stops)
{
    memset(s, 0, sizeof *s);
    s->stops = stops;
    s->n_stops = n_stops;
}

/* Whether text[0..len) is a proper prefix of some stop string. */
static int is_stop_prefix(const srv_stopper *s, const char *text, size_t len)
{
    for (int i = 0; i < s->n_stops; i++) {
        size_t sl = strlen(s->stops[i]);
        if (len < sl && memcmp(s->stops[i], text, len) == 0)
            return 1;
    }
    return 0;
}

int srv_stopper_feed(srv_stopper *s, const char *text, size_t len, mhla_buf *out)
{
    if (s->n_stops == 0)
        return mhla_buf_put(out, text, len);
    if (mhla_buf_put(&s->pending, text, len))
        return -1;
    const char *p = s->pending.p;
    size_t n = s->pending.len;
    /* earliest complete stop string */
    size_t hit = n;
    for (int i = 0; i < s->n_stops; i++) {
        size_t sl = strlen(s->stops[i]);
        for (size_t k = 0; k + sl <= n && k < hit; k++)
            if (memcmp(p + k, s->stops[i], sl) == 0) {
                hit = k;
                break;
            }
    }
    if (hit < n) {
        int rc = mhla_buf_put(out, p, hit);
        s->pending.len = 0;
        s->pending.p[0] = 0;
        return rc ? -1 : 1;
    }
    /* the earliest suffix that could still grow into a stop string stays */
    size_t keep_from = n;
    for (size_t k = 0; k < n; k++)
        if (is_stop_prefix(s, p + k, n - k)) {
            keep_from = k;
            break;
        }
    if (mhla_buf_put(out, p, keep_from))
        return -1;
    memmove(s->pending.p, p + keep_from, n - keep_from);
    s->pending.len = n - keep_from;
    s->pending.p[s->pending.len] = 0;
    return 0;
}

int srv_stopper_flush(srv_stopper *s, mhla_buf *out)
{
    int rc = 0;
    if (s->pending.len)
        rc = mhla_buf_put(out, s->pending.p, s->pending.len);
    if (s->pending.p) {
        s->pending.len = 0;
        s->pending.p[0] = 0;
    }
    return rc;
}

void srv_stopper_free(srv_stopper *s) { mhla_buf_free(&s->pending); }
