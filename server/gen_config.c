/*
 * gen_config.c — generation_config.json: the end-of-sequence ids (an id or a
 * list; config.json's eos_token_id when absent) and default sampling values
 * (temperature, top_p, top_k, min_p, repetition_penalty) for requests that
 * do not set them.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A number field within [lo, hi] into *out; absent or null leaves it. */
static int num_field(const cJSON *root, const char *name, double lo, double hi, float *out,
                     const char *path, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        snprintf(err, errlen, "%s: '%s' must be a number in [%g, %g]", path, name, lo, hi);
        return -1;
    }
    *out = (float)v->valuedouble;
    return 0;
}

static int parse(const cJSON *root, const mhla_config *cfg, srv_gen_config *g, const char *path,
                 char *err, size_t errlen)
{
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s is not a JSON object", path);
        return -1;
    }
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (eos && !cJSON_IsNull(eos)) {
        int n = cJSON_IsArray(eos) ? cJSON_GetArraySize(eos) : 1;
        if (n > SRV_MAX_EOS) {
            snprintf(err, errlen, "%s: at most %d eos_token_id values are supported, got %d", path,
                     SRV_MAX_EOS, n);
            return -1;
        }
        const cJSON *it = cJSON_IsArray(eos) ? eos->child : eos;
        for (int i = 0; i < n; i++, it = it->next) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= cfg->vocab_size ||
                it->valuedouble != floor(it->valuedouble)) {
                snprintf(err, errlen,
                         "%s: eos_token_id must be a token id in [0, %d) or a list of them", path,
                         cfg->vocab_size);
                return -1;
            }
            g->eos[g->n_eos++] = (int32_t)it->valuedouble;
        }
        g->source = "generation_config.json";
    }
    mhla_sampling_params *d = &g->defaults;
    float top_k = 0;
    if (num_field(root, "temperature", 0, 2, &d->temperature, path, err, errlen) ||
        num_field(root, "top_p", 1e-9, 1, &d->top_p, path, err, errlen) ||
        num_field(root, "min_p", 0, 1, &d->min_p, path, err, errlen) ||
        num_field(root, "repetition_penalty", 1e-9, 10, &d->repetition_penalty, path, err,
                  errlen) ||
        num_field(root, "top_k", 0, cfg->vocab_size, &top_k, path, err, errlen))
        return -1;
    d->top_k = (int)top_k;
    return 0;
}

int srv_gen_config_load(const char *dir, const mhla_config *cfg, srv_gen_config *g, char *err,
                        size_t errlen)
{
    memset(g, 0, sizeof *g);
    mhla_sampling_defaults(&g->defaults);
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    size_t len = 0;
    char *text = NULL, msg[512];
    int rd = mhla_read_file(path, (size_t)1 << 24, &text, &len, msg, sizeof msg);
    if (rd && !(rd == MHLA_READ_IO && access(path, F_OK) != 0)) { /* absent is fine */
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    if (text) {
        cJSON *root = cJSON_ParseWithLength(text, len);
        free(text);
        if (!root) {
            snprintf(err, errlen, "%s is not valid JSON", path);
            return -1;
        }
        int rc = parse(root, cfg, g, path, err, errlen);
        cJSON_Delete(root);
        if (rc)
            return -1;
    }
    if (g->n_eos == 0 && cfg->eos_token_id >= 0 && cfg->eos_token_id < cfg->vocab_size) {
        g->eos[g->n_eos++] = cfg->eos_token_id;
        g->source = "config.json";
    }
    if (g->n_eos == 0)
        g->source = "none";
    return 0;
}

int srv_gen_is_eos(const srv_gen_config *g, int32_t id)
{
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos[i] == id)
            return 1;
    return 0;
}
