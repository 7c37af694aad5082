/*
 * util.c — small helpers of the clients: the monotonic clock, the bench's own
 * random generator (runs repeat from a seed on any libc), growable strings,
 * and the blocking JSON POST used for /tokenize and /detokenize.
 */
#include "client_internal.h"

#include <cJSON.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cl_rng_seed(cl_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next(cl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cl_rng_uniform(cl_rng *r)
{
    return (double)(next(r) >> 11) * 0x1.0p-53;
}

double cl_rng_normal(cl_rng *r)
{
    /* Box–Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
    double u = 1.0 - cl_rng_uniform(r), v = cl_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

int cl_str_append(cl_str *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p)
            return -1;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return 0;
}

void cl_str_free(cl_str *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static size_t collect(char *data, size_t size, size_t nmemb, void *ud)
{
    return cl_str_append(ud, data, size * nmemb) ? 0 : size * nmemb;
}

int cl_post_json(const cl_conn *c, const char *path, const char *body, long *status,
                 char **body_out, char *err)
{
    *body_out = NULL;
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(err, CL_ERR_LEN, "curl_easy_init failed");
        return -1;
    }
    cl_str url = {0}, resp = {0}, auth = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json"), *h1;
    if (h && (h1 = curl_slist_append(h, "Expect:"))) /* no 100-continue wait */
        h = h1;
    int rc = -1;
    if (!h || cl_str_append(&url, c->url, strlen(c->url)) ||
        cl_str_append(&url, path, strlen(path))) {
        snprintf(err, CL_ERR_LEN, "out of memory building a request to %s", path);
        goto out;
    }
    if (c->api_key) {
        struct curl_slist *h2;
        if (cl_str_append(&auth, "Authorization: Bearer ", 22) ||
            cl_str_append(&auth, c->api_key, strlen(c->api_key)) ||
            !(h2 = curl_slist_append(h, auth.s))) {
            snprintf(err, CL_ERR_LEN, "out of memory building a request to %s", path);
            goto out;
        }
        h = h2;
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, url.s);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (c->timeout_s > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000.0));
    CURLcode cr = curl_easy_perform(e);
    if (cr != CURLE_OK) {
        snprintf(err, CL_ERR_LEN, "POST %.120s: %.120s", url.s,
                 cerr[0] ? cerr : curl_easy_strerror(cr));
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    if (!resp.s && cl_str_append(&resp, "", 0)) {
        snprintf(err, CL_ERR_LEN, "out of memory reading %s", path);
        goto out;
    }
    *body_out = resp.s;
    resp.s = NULL;
    rc = 0;
out:
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    cl_str_free(&url);
    cl_str_free(&resp);
    cl_str_free(&auth);
    return rc;
}

char *cl_json_string(const char *s)
{
    cJSON *v = cJSON_CreateString(s);
    char *out = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    return out;
}
