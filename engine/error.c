/*
 * error.c — how the engine's functions fail: a message naming the cause and
 * a code saying what kind of failure it is (engine.h, mhla_status).
 */
#include "engine_internal.h"

#include <stdio.h>

static int vfail(mhla_error *err, mhla_status code, const char *fmt, va_list ap)
{
    if (err) {
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        err->code = code;
    }
    return -1;
}

int eng_fail(mhla_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, MHLA_ERR_INVALID, fmt, ap);
    va_end(ap);
    return -1;
}

int eng_fail_as(mhla_error *err, mhla_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, fmt, ap);
    va_end(ap);
    return -1;
}

int eng_fail_kv(mhla_error *err, const kv_error *ke)
{
    mhla_status code;
    switch (ke->code) {
    case KV_ERR_FULL: code = MHLA_ERR_FULL; break;
    case KV_ERR_NOMEM: code = MHLA_ERR_NOMEM; break;
    case KV_ERR_IO: code = MHLA_ERR_IO; break;
    case KV_ERR_INTERNAL: code = MHLA_ERR_INTERNAL; break;
    default: code = MHLA_ERR_INVALID; break;
    }
    return eng_fail_as(err, code, "%s", ke->msg);
}
