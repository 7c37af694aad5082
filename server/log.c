/*
 * log.c — structured logging: one JSON object per line on stderr (for log
 * collectors), or the same fields as a line for people ("TIME LEVEL event:
 * message key=value ...", --log-format text), and the access log's line for
 * every HTTP request.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int g_level = MHLA_LOG_INFO;
static atomic_int g_text; /* 1: --log-format text */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *level_name(mhla_log_level l)
{
    switch (l) {
    case MHLA_LOG_DEBUG: return "debug";
    case MHLA_LOG_INFO: return "info";
    case MHLA_LOG_WARN: return "warn";
    case MHLA_LOG_ERROR: return "error";
    default: return "off";
    }
}

void srv_log_set_level(mhla_log_level lvl) { atomic_store(&g_level, (int)lvl); }

void srv_log_set_format(int text) { atomic_store(&g_text, text != 0); }

/* A string value as it is, unless quotes are needed to tell where it ends. */
static void text_value(mhla_buf *b, const cJSON *v)
{
    if (cJSON_IsString(v) && v->valuestring[0] && !strpbrk(v->valuestring, " \"=\n\t")) {
        srv_buf_printf(b, "%s", v->valuestring);
        return;
    }
    char *s = cJSON_PrintUnformatted(v);
    srv_buf_printf(b, "%s", s ? s : "?");
    free(s);
}

/* "2024-05-01T12:00:00.123Z LEVEL event: message key=value ..." from the JSON
 * line's object o (ts, level, event, message and the other fields). */
static char *text_line(const cJSON *o)
{
    double ts = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "ts"));
    time_t sec = (time_t)ts;
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    const char *level = cJSON_GetStringValue(cJSON_GetObjectItem(o, "level"));
    const char *event = cJSON_GetStringValue(cJSON_GetObjectItem(o, "event"));
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(o, "message"));
    mhla_buf b = {0};
    srv_buf_printf(&b, "%s.%03dZ %-5s %s:", when, (int)((ts - (double)sec) * 1000),
                   level ? level : "?", event ? event : "?");
    if (msg)
        srv_buf_printf(&b, " %s", msg);
    for (const cJSON *it = o->child; it; it = it->next) {
        if (!strcmp(it->string, "ts") || !strcmp(it->string, "level") ||
            !strcmp(it->string, "event") || !strcmp(it->string, "message"))
            continue;
        srv_buf_printf(&b, " %s=", it->string);
        text_value(&b, it);
    }
    return b.p;
}

int srv_log_enabled(mhla_log_level lvl)
{
    return lvl != MHLA_LOG_OFF && (int)lvl >= atomic_load(&g_level);
}

void srv_log(mhla_log_level lvl, const char *event, cJSON *fields)
{
    if (!srv_log_enabled(lvl)) {
        cJSON_Delete(fields);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        cJSON_Delete(fields);
        return;
    }
    cJSON_AddNumberToObject(o, "ts", (double)(long long)(srv_wall_time() * 1000.0) / 1000.0);
    cJSON_AddStringToObject(o, "level", level_name(lvl));
    cJSON_AddStringToObject(o, "event", event);
    if (fields) {
        cJSON *it = fields->child;
        while (it) {
            cJSON *next = it->next;
            cJSON_DetachItemViaPointer(fields, it);
            cJSON_AddItemToObject(o, it->string, it);
            it = next;
        }
        cJSON_Delete(fields);
    }
    char *s = atomic_load(&g_text) ? text_line(o) : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return;
    pthread_mutex_lock(&g_mu);
    fprintf(stderr, "%s\n", s);
    fflush(stderr);
    pthread_mutex_unlock(&g_mu);
    free(s);
}

void srv_logf(mhla_log_level lvl, const char *event, const char *fmt, ...)
{
    if (!srv_log_enabled(lvl))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *f = cJSON_CreateObject();
    if (f)
        cJSON_AddStringToObject(f, "message", msg);
    srv_log(lvl, event, f);
}

/* ---- the access log ---------------------------------------------------------- */

/* The request's own fields of the log line. */
static void request_fields(cJSON *f, srv_req *r, int stream)
{
    srv_req_lock(r);
    cJSON_AddStringToObject(f, "id", r->id);
    if (r->p.user) /* the client's end-user id, for tracing abuse back */
        cJSON_AddStringToObject(f, "user", r->p.user);
    cJSON_AddBoolToObject(f, "stream", stream);
    cJSON_AddNumberToObject(f, "prompt_tokens", (double)r->prompt_tokens);
    cJSON_AddNumberToObject(f, "completion_tokens", (double)r->completion_tokens);
    cJSON_AddNumberToObject(f, "choices", r->n_choices);
    const char *fr = r->failed              ? "error"
                     : srv_req_cancelled(r) ? "cancelled"
                     : r->done              ? r->choices[0].finish_reason
                                            : "unfinished";
    cJSON_AddStringToObject(f, "finish_reason", fr ? fr : "unfinished");
    if (r->t_admit > 0)
        cJSON_AddNumberToObject(f, "queue_wait_ms",
                                (double)(long long)((r->t_admit - r->t_arrive) * 1e6) / 1e3);
    if (r->t_first > 0)
        cJSON_AddNumberToObject(f, "ttft_ms",
                                (double)(long long)((r->t_first - r->t_arrive) * 1e6) / 1e3);
    srv_req_unlock(r);
}

void srv_log_access(const srv_access *a)
{
    if (!srv_log_enabled(MHLA_LOG_INFO))
        return;
    cJSON *f = cJSON_CreateObject();
    if (f) {
        cJSON_AddStringToObject(f, "method", a->method);
        cJSON_AddStringToObject(f, "path", a->path);
        cJSON_AddNumberToObject(f, "status", a->status);
        cJSON_AddNumberToObject(f, "duration_ms", (double)(long long)(a->duration_s * 1e6) / 1e3);
        cJSON_AddStringToObject(f, "termination", a->termination);
        if (a->request_id)
            cJSON_AddStringToObject(f, "request_id", a->request_id);
        if (a->remote)
            cJSON_AddStringToObject(f, "remote", a->remote);
        if (a->r)
            request_fields(f, a->r, a->stream);
    }
    srv_log(a->status >= 500 ? MHLA_LOG_WARN : MHLA_LOG_INFO, "request", f);
}

/* ---- unknown request fields ------------------------------------------------ */

enum { UNKNOWN_NAMES = 64, UNKNOWN_NAME_LEN = 64 };
static char unknown_seen[UNKNOWN_NAMES][UNKNOWN_NAME_LEN];
static int n_unknown_seen;

/* Records name; 1 when it is new and there was room. g_mu held. */
static int first_sight(const char *name)
{
    for (int i = 0; i < n_unknown_seen; i++)
        if (!strncmp(unknown_seen[i], name, UNKNOWN_NAME_LEN - 1))
            return 0;
    if (n_unknown_seen == UNKNOWN_NAMES)
        return 0;
    snprintf(unknown_seen[n_unknown_seen++], UNKNOWN_NAME_LEN, "%s", name);
    return 1;
}

void srv_log_unknown_field(const char *name)
{
    if (!srv_log_enabled(MHLA_LOG_DEBUG))
        return;
    pthread_mutex_lock(&g_mu);
    int fresh = first_sight(name);
    pthread_mutex_unlock(&g_mu);
    if (fresh)
        srv_logf(MHLA_LOG_DEBUG, "unknown_field",
                 "a request carried the field '%.60s', which this server does not know; it is "
                 "accepted and has no effect (logged once)",
                 name);
}
