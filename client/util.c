/*
 * util.c — small helpers of the clients: the blocking JSON POST used for
 * /tokenize and /detokenize (the clock, the generator and the growable
 * buffer are base/'s).
 */
#include "client_internal.h"

#include <cJSON.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t collect(char *data, size_t size, size_t nmemb, void *ud)
{
    return mhla_buf_put(ud, data, size * nmemb) ? 0 : size * nmemb;
}

/* Content-Type, no 100-continue wait and, with an API key, the bearer token
 * (built in auth); NULL when out of memory. */
static struct curl_slist *post_headers(const cl_conn *c, mhla_buf *auth)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json"), *more;
    if (!h || !(more = curl_slist_append(h, "Expect:")))
        goto oom;
    h = more;
    if (!c->api_key)
        return h;
    if (mhla_buf_put(auth, "Authorization: Bearer ", 22) ||
        mhla_buf_put(auth, c->api_key, strlen(c->api_key)) ||
        !(more = curl_slist_append(h, auth->p)))
        goto oom;
    return more;
oom:
    curl_slist_free_all(h);
    return NULL;
}

/* One blocking POST of body to url; the response body lands in resp. */
static int perform_post(CURL *e, const cl_conn *c, const char *url, struct curl_slist *h,
                        const char *body, mhla_buf *resp, long *status, char *err)
{
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (c->timeout_s > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000.0));
    CURLcode cr = curl_easy_perform(e);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL); /* cerr goes out of scope */
    if (cr != CURLE_OK) {
        snprintf(err, CL_ERR_LEN, "POST %.120s: %.120s", url,
                 cerr[0] ? cerr : curl_easy_strerror(cr));
        return -1;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    return 0;
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
    mhla_buf url = {0}, resp = {0}, auth = {0};
    struct curl_slist *h = post_headers(c, &auth);
    int rc = -1;
    if (!h || mhla_buf_put(&url, c->url, strlen(c->url)) ||
        mhla_buf_put(&url, path, strlen(path))) {
        snprintf(err, CL_ERR_LEN, "out of memory building a request to %s", path);
        goto out;
    }
    if (perform_post(e, c, url.p, h, body, &resp, status, err))
        goto out;
    if (!resp.p && mhla_buf_put(&resp, "", 0)) {
        snprintf(err, CL_ERR_LEN, "out of memory reading %s", path);
        goto out;
    }
    *body_out = resp.p;
    resp.p = NULL;
    rc = 0;
out:
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    mhla_buf_free(&url);
    mhla_buf_free(&resp);
    mhla_buf_free(&auth);
    return rc;
}

char *cl_json_string(const char *s)
{
    cJSON *v = cJSON_CreateString(s);
    char *out = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    return out;
}
