/*
 * log.c — structured logging: one JSON object per line on stderr.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int g_level = MHLA_LOG_INFO;
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
    char *s = cJSON_PrintUnformatted(o);
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
