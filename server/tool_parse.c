/*
 * tool_parse.c — the tool calls in a chat choice's text, as it streams: the
 * text goes in as the stop strings release it, and comes out split into the
 * content the client sees and the calls ({"name", "arguments"}) it gets as
 * tool_calls. Three formats, the ones open models are trained on:
 *
 *   hermes   <tool_call>{"name": …, "arguments": {…}}</tool_call>, any number,
 *            anywhere in the reply (Hermes, Qwen 2.5/3 and ChatML templates);
 *   llama3   the whole reply is {"name": …, "parameters": {…}} (several may
 *            be joined with ';'), optionally after <|python_tag|>;
 *   mistral  [TOOL_CALLS] then [{"name": …, "arguments": {…}}, …], or the
 *            newer [TOOL_CALLS]name[ARGS]{…}, to the end of the reply.
 *
 * Text that could still be a marker's start is held back, and so is a call's
 * body until it closes; what does not parse as a call is given back as
 * content, byte for byte, so nothing the model wrote is lost.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

enum { TP_TEXT, TP_CALL, TP_TAIL };

struct srv_tool_parser {
    srv_tool_format fmt;
    int mode;      /* TP_TEXT: content; TP_CALL: inside a hermes call; TP_TAIL: held to the end */
    int started;   /* llama3: the reply's first non-space text was content */
    int n_calls;   /* calls found so far */
    mhla_buf hold; /* text not yet given out */
    mhla_buf gap;  /* the whitespace before an open call: content again if it is none */
};

static const char HERMES_OPEN[] = "<tool_call>", HERMES_CLOSE[] = "</tool_call>";
static const char MISTRAL_OPEN[] = "[TOOL_CALLS]", MISTRAL_ARGS[] = "[ARGS]";
static const char PYTHON_TAG[] = "<|python_tag|>";

const char *srv_tool_format_name(srv_tool_format f)
{
    return f == SRV_TOOLS_HERMES    ? "hermes"
           : f == SRV_TOOLS_LLAMA3  ? "llama3"
           : f == SRV_TOOLS_MISTRAL ? "mistral"
                                    : "none";
}

int srv_tool_format_from_name(const char *name, srv_tool_format *f)
{
    for (int k = SRV_TOOLS_NONE; k <= SRV_TOOLS_MISTRAL; k++)
        if (!strcmp(name, srv_tool_format_name((srv_tool_format)k))) {
            *f = (srv_tool_format)k;
            return 0;
        }
    return -1;
}

srv_tool_format srv_tool_format_detect(const char *tpl)
{
    if (strstr(tpl, MISTRAL_OPEN))
        return SRV_TOOLS_MISTRAL;
    if (strstr(tpl, HERMES_OPEN))
        return SRV_TOOLS_HERMES;
    if (strstr(tpl, PYTHON_TAG) || strstr(tpl, "ipython"))
        return SRV_TOOLS_LLAMA3;
    return SRV_TOOLS_HERMES;
}

srv_tool_parser *srv_tool_parser_new(srv_tool_format f)
{
    srv_tool_parser *tp = calloc(1, sizeof *tp);
    if (tp)
        tp->fmt = f;
    return tp;
}

void srv_tool_parser_free(srv_tool_parser *tp)
{
    if (!tp)
        return;
    mhla_buf_free(&tp->hold);
    mhla_buf_free(&tp->gap);
    free(tp);
}

int srv_tool_parser_calls(const srv_tool_parser *tp) { return tp ? tp->n_calls : 0; }

/* ---- one call's JSON into {"name", "arguments": "<JSON text>"} ---------- */

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* name and its arguments (an object, or already a JSON string) as a call. */
static cJSON *make_call(const char *name, const cJSON *args)
{
    cJSON *call = cJSON_CreateObject();
    char *text = !args                  ? strdup("{}")
                 : cJSON_IsString(args) ? strdup(args->valuestring)
                                        : cJSON_PrintUnformatted(args);
    int ok = call && text && cJSON_AddStringToObject(call, "name", name) &&
             cJSON_AddStringToObject(call, "arguments", text);
    free(text);
    if (ok)
        return call;
    cJSON_Delete(call);
    return NULL;
}

/* A string that holds a JSON object (arguments some models write as
 * text): 1, 0 when it does not, -1 out of memory. */
static int object_text(const char *s)
{
    int nomem = 0;
    cJSON *v = srv_json_parse(s, strlen(s), NULL, &nomem);
    int ok = nomem ? -1 : cJSON_IsObject(v);
    cJSON_Delete(v);
    return ok;
}

/* A call object as the model wrote it: a string "name" and, under
 * "arguments" or "parameters", an object (or a string holding one). 1, 0
 * not a call, -1 out of memory. */
static int call_shape(const cJSON *o, const char **name, const cJSON **args)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!a)
        a = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(n) || !n->valuestring[0] ||
        (a && !cJSON_IsObject(a) && !cJSON_IsString(a)))
        return 0;
    int ok = cJSON_IsString(a) ? object_text(a->valuestring) : 1;
    *name = n->valuestring;
    *args = a;
    return ok;
}

/* The first m in s[0, len), or NULL (memmem is not C11). */
static const char *find(const char *s, size_t len, const char *m)
{
    size_t ml = strlen(m);
    for (size_t i = 0; i + ml <= len; i++)
        if (s[i] == m[0] && !memcmp(s + i, m, ml))
            return s + i;
    return NULL;
}

/* Appends item to got as a call: 1, 0 when it is not one, -1 out of memory. */
static int add_call(const cJSON *item, cJSON *got)
{
    const char *name;
    const cJSON *args;
    int shape = call_shape(item, &name, &args);
    if (shape <= 0)
        return shape;
    cJSON *call = make_call(name, args);
    return call && cJSON_AddItemToArray(got, call) ? 1 : (cJSON_Delete(call), -1);
}

/* v's calls (v a call, or with arrays a non-empty array of them) into got. */
static int add_calls(const cJSON *v, int arrays, cJSON *got)
{
    if (!arrays || !cJSON_IsArray(v))
        return add_call(v, got);
    int rc = v->child ? 1 : 0;
    for (const cJSON *item = v->child; item && rc == 1; item = item->next)
        rc = add_call(item, got);
    return rc;
}

/* got's calls moved to out when rc is 1; rc passed on. */
static int settle(int rc, cJSON *got, cJSON *out)
{
    if (rc == 1 && (!got || !got->child))
        rc = 0;
    while (rc == 1 && got->child)
        cJSON_AddItemToArray(out, cJSON_DetachItemViaPointer(got, got->child));
    cJSON_Delete(got);
    return rc;
}

/* Parses JSON values from s[0, len): each a call object (or, with arrays,
 * an array of them), separated by whitespace or sep. The calls go to out;
 * 1 when all of s was calls, 0 when not (out unchanged), -1 out of memory. */
static int parse_calls(const char *s, size_t len, char sep, int arrays, cJSON *out)
{
    cJSON *got = cJSON_CreateArray();
    size_t i = 0;
    int rc = got ? 1 : -1;
    while (rc == 1) {
        while (i < len && (is_space(s[i]) || (sep && s[i] == sep)))
            i++;
        if (i == len)
            break;
        const char *end = NULL;
        int nomem = 0;
        cJSON *v = srv_json_parse(s + i, len - i, &end, &nomem);
        rc = v ? add_calls(v, arrays, got) : nomem ? -1 : 0;
        i = v ? (size_t)(end - s) : len;
        cJSON_Delete(v);
    }
    return settle(rc, got, out);
}

/* One name[ARGS]{…} at s into got; *used is its length. 1, 0 or -1. */
static int named_args_call(const char *s, size_t len, cJSON *got, size_t *used)
{
    size_t alen = strlen(MISTRAL_ARGS);
    const char *a = find(s, len, MISTRAL_ARGS), *end = NULL;
    size_t nlen = a ? (size_t)(a - s) : 0;
    char name[256];
    if (!nlen || nlen >= sizeof name)
        return 0;
    for (size_t k = 0; k < nlen; k++) /* a function name: letters, digits, _ - . */
        if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') ||
              (s[k] >= '0' && s[k] <= '9') || s[k] == '_' || s[k] == '-' || s[k] == '.'))
            return 0;
    memcpy(name, s, nlen);
    name[nlen] = 0;
    int nomem = 0;
    cJSON *args = srv_json_parse(a + alen, len - nlen - alen, &end, &nomem);
    cJSON *call = cJSON_IsObject(args) ? make_call(name, args) : NULL;
    int rc = call && cJSON_AddItemToArray(got, call) ? 1 : cJSON_IsObject(args) || nomem ? -1 : 0;
    if (rc == -1)
        cJSON_Delete(call);
    *used = rc == 1 ? (size_t)(end - s) : len;
    cJSON_Delete(args);
    return rc;
}

/* mistral's newer form: name[ARGS]{…}, repeated, each after [TOOL_CALLS]. */
static int parse_named_args(const char *s, size_t len, cJSON *out)
{
    cJSON *got = cJSON_CreateArray();
    int rc = got ? 1 : -1;
    size_t i = 0, olen = strlen(MISTRAL_OPEN);
    while (rc == 1 && i < len) {
        size_t used = 0;
        rc = named_args_call(s + i, len - i, got, &used);
        i += used;
        while (rc == 1 && i < len && is_space(s[i]))
            i++;
        if (rc == 1 && len - i >= olen && !memcmp(s + i, MISTRAL_OPEN, olen))
            i += olen;
    }
    return settle(rc, got, out);
}

/* ---- the stream ---------------------------------------------------------- */

/* The longest suffix of s[0, len) that is a proper prefix of marker. */
static size_t partial_marker(const char *s, size_t len, const char *marker)
{
    size_t m = strlen(marker);
    for (size_t k = m - 1 < len ? m - 1 : len; k > 0; k--)
        if (!memcmp(s + len - k, marker, k))
            return k;
    return 0;
}

/* Keeps hold[from, len) as the hold, moved in place. */
static int keep_from(srv_tool_parser *tp, size_t len, size_t from)
{
    if (from > 0 && from < len)
        memmove(tp->hold.p, tp->hold.p + from, len - from);
    tp->hold.len = len - from;
    if (tp->hold.p)
        tp->hold.p[tp->hold.len] = 0;
    return 0;
}

/* Content s[0, n), less its trailing whitespace when a call follows. */
static int give(mhla_buf *content, const char *s, size_t n, int call_follows)
{
    while (call_follows && n > 0 && is_space(s[n - 1]))
        n--;
    return n ? mhla_buf_put(content, s, n) : 0;
}

/* The text before a marker: content, its trailing whitespace kept aside
 * until the call proves one (gap). */
static int give_before_call(srv_tool_parser *tp, const char *s, size_t n, mhla_buf *content)
{
    size_t k = n;
    while (k > 0 && is_space(s[k - 1]))
        k--;
    tp->gap.len = 0;
    return give(content, s, k, 0) || mhla_buf_put(&tp->gap, s + k, n - k);
}

/* What was held for a call that is none: the gap, marker and body as written. */
static int give_back(srv_tool_parser *tp, const char *marker, const char *body, size_t n,
                     const char *closer, mhla_buf *content)
{
    return mhla_buf_put(content, tp->gap.p ? tp->gap.p : "", tp->gap.len) ||
           mhla_buf_put(content, marker, strlen(marker)) || mhla_buf_put(content, body, n) ||
           mhla_buf_put(content, closer, strlen(closer));
}

static int found(srv_tool_parser *tp, cJSON *calls, int rc)
{
    if (rc == 1)
        tp->n_calls = cJSON_GetArraySize(calls);
    return rc;
}

/* A closed hermes call body: a call, or given back as the text it was. */
static int hermes_call(srv_tool_parser *tp, const char *body, size_t n, int closed,
                       mhla_buf *content, cJSON *calls)
{
    int rc = found(tp, calls, parse_calls(body, n, 0, 0, calls));
    if (rc)
        return rc < 0 ? -1 : 0;
    return give_back(tp, HERMES_OPEN, body, n, closed ? HERMES_CLOSE : "", content);
}

/* Content until the marker; TP_CALL/TP_TAIL from it on. s is hold + new text. */
static int scan_text(srv_tool_parser *tp, const char *s, size_t len, const char *marker,
                     mhla_buf *content)
{
    const char *m = find(s, len, marker);
    if (m) {
        size_t at = (size_t)(m - s);
        tp->mode = tp->fmt == SRV_TOOLS_HERMES ? TP_CALL : TP_TAIL;
        return give_before_call(tp, s, at, content) || keep_from(tp, len, at + strlen(marker));
    }
    size_t held = partial_marker(s, len, marker), n = len - held;
    while (n > 0 && is_space(s[n - 1])) /* whitespace waits: a call may follow */
        n--;
    return give(content, s, n, 0) || keep_from(tp, len, n);
}

/* llama3: a reply that opens with '{' or <|python_tag|> is held to the end. */
static int scan_start(srv_tool_parser *tp, const char *s, size_t len, mhla_buf *content)
{
    size_t i = 0;
    while (i < len && is_space(s[i]))
        i++;
    size_t rest = len - i, tl = strlen(PYTHON_TAG);
    if (rest == 0 || (rest < tl && !memcmp(s + i, PYTHON_TAG, rest)))
        return keep_from(tp, len, 0);
    if (s[i] == '{' || (rest >= tl && !memcmp(s + i, PYTHON_TAG, tl))) {
        tp->mode = TP_TAIL; /* held whole, leading whitespace too: it may be content yet */
        return 0;
    }
    tp->started = 1;
    return mhla_buf_put(content, s, len) || keep_from(tp, len, len);
}

static int step(srv_tool_parser *tp, mhla_buf *content, cJSON *calls)
{
    char *s = tp->hold.p;
    size_t len = tp->hold.len;
    if (tp->mode == TP_CALL) {
        const char *e = find(s, len, HERMES_CLOSE);
        if (!e)
            return 0;
        size_t at = (size_t)(e - s);
        tp->mode = TP_TEXT;
        return hermes_call(tp, s, at, 1, content, calls) ||
               keep_from(tp, len, at + strlen(HERMES_CLOSE));
    }
    if (tp->mode == TP_TAIL)
        return 0;
    if (tp->fmt == SRV_TOOLS_LLAMA3)
        return tp->started ? mhla_buf_put(content, s, len) || keep_from(tp, len, len)
                           : scan_start(tp, s, len, content);
    return scan_text(tp, s, len, tp->fmt == SRV_TOOLS_HERMES ? HERMES_OPEN : MISTRAL_OPEN, content);
}

int srv_tool_feed(srv_tool_parser *tp, const char *text, size_t len, mhla_buf *content,
                  cJSON *calls)
{
    if (len && mhla_buf_put(&tp->hold, text, len))
        return -1;
    while (tp->hold.len > 0) { /* a step may leave text another step takes (a second call) */
        int mode = tp->mode;
        size_t before = tp->hold.len;
        if (step(tp, content, calls))
            return -1;
        if (tp->mode == mode && tp->hold.len == before)
            return 0;
        if (tp->mode == TP_TAIL)
            return 0;
    }
    return 0;
}

/* The end of a held tail: its calls, or all of it given back. */
static int finish_tail(srv_tool_parser *tp, mhla_buf *content, cJSON *calls)
{
    const char *s = tp->hold.p ? tp->hold.p : "";
    size_t len = tp->hold.len, tl = strlen(PYTHON_TAG);
    int rc;
    if (tp->fmt == SRV_TOOLS_LLAMA3) {
        size_t skip = 0;
        while (skip < len && is_space(s[skip]))
            skip++;
        if (len - skip >= tl && !memcmp(s + skip, PYTHON_TAG, tl))
            skip += tl;
        rc = found(tp, calls, parse_calls(s + skip, len - skip, ';', 0, calls));
        return rc < 0 ? -1 : rc ? 0 : mhla_buf_put(content, s, len);
    }
    size_t i = 0;
    while (i < len && is_space(s[i]))
        i++;
    rc = i < len && s[i] == '[' ? parse_calls(s + i, len - i, 0, 1, calls)
                                : parse_named_args(s + i, len - i, calls);
    rc = found(tp, calls, rc);
    if (rc)
        return rc < 0 ? -1 : 0;
    return give_back(tp, MISTRAL_OPEN, s, len, "", content);
}

int srv_tool_finish(srv_tool_parser *tp, mhla_buf *content, cJSON *calls)
{
    int rc = 0;
    if (tp->mode == TP_CALL)
        rc = hermes_call(tp, tp->hold.p ? tp->hold.p : "", tp->hold.len, 0, content, calls);
    else if (tp->mode == TP_TAIL)
        rc = finish_tail(tp, content, calls);
    else
        rc = give(content, tp->hold.p ? tp->hold.p : "", tp->hold.len, tp->n_calls > 0);
    tp->hold.len = 0;
    tp->mode = TP_TEXT;
    return rc ? -1 : 0;
}
