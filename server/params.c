/*
 * params.c — parsing and validation of POST /v1/completions and
 * /v1/chat/completions bodies (cJSON): one field parser for both, the
 * endpoint choosing prompt or messages and each one's refusals.
 * Every bad value is refused with a 400 that names the field; a field of the
 * OpenAI API (or a common extension) that this server does not implement is
 * refused the same way, never silently ignored; other unknown fields are
 * accepted (and logged once at debug level); JSON null means "use the
 * default".
 */
#include "server_internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int __attribute__((format(printf, 3, 4)))
bad(srv_error *e, const char *param, const char *fmt, ...)
{
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    srv_error_set(e, SRV_ERR_INVALID, param, "%s", msg);
    return -1;
}
#define BAD(param, ...) bad(e, param, __VA_ARGS__)
/* The server's own failure, not the request's: 500. */
#define OOM(param) (srv_error_set(e, SRV_ERR_INTERNAL, param, "out of memory"), -1)

int srv_json_depth_ok(const char *s, size_t len, int max_depth)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return 0;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 1;
}

/* 1 when a JSON string in s holds an escaped NUL (\u0000): C strings would
 * end there and silently drop the rest. */
static int has_nul_escape(const char *s, size_t len)
{
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        if (!in_str) {
            in_str = s[i] == '"';
            continue;
        }
        if (s[i] == '"')
            in_str = 0;
        else if (s[i] == '\\' && i + 5 < len && s[i + 1] == 'u' &&
                 strncmp(s + i + 2, "0000", 4) == 0)
            return 1;
        else if (s[i] == '\\')
            i++;
    }
    return 0;
}

cJSON *srv_json_parse_body(const char *body, size_t len, srv_error *e)
{
    if (!srv_json_depth_ok(body, len, 32)) {
        BAD(NULL, "the request body nests JSON deeper than 32 levels");
        return NULL;
    }
    if (memchr(body, 0, len) || has_nul_escape(body, len)) {
        BAD(NULL, "strings in the request body must not contain NUL (\\u0000)");
        return NULL;
    }
    const char *where = NULL;
    int nomem;
    cJSON *root = srv_json_parse(body, len, &where, &nomem);
    if (!root && nomem) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory reading the request body");
        return NULL;
    }
    if (!root) {
        long off = where && where >= body && where <= body + len ? (long)(where - body) : -1;
        BAD(NULL, "the request body is not valid JSON (error near byte %ld)", off);
        return NULL;
    }
    while (where && where < body + len && strchr(" \t\r\n", *where))
        where++;
    if (where && where < body + len) {
        cJSON_Delete(root);
        BAD(NULL, "the request body holds more than one JSON value (trailing data at byte %ld)",
            (long)(where - body));
        return NULL;
    }
    return root;
}

static cJSON *field(const cJSON *root, const char *name)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return (v && cJSON_IsNull(v)) ? NULL : v;
}

static int get_bool(const cJSON *root, const char *name, int *out, srv_error *e)
{
    cJSON *v = field(root, name);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return BAD(name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int is_integer(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
           floor(v->valuedouble) == v->valuedouble && fabs(v->valuedouble) <= 9007199254740992.0;
}

static int get_int(const cJSON *root, const char *name, long long lo, long long hi, long long *out,
                   srv_error *e)
{
    cJSON *v = field(root, name);
    if (!v)
        return 0;
    if (!is_integer(v))
        return BAD(name, "'%s' must be an integer", name);
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return BAD(name, "'%s' must be between %lld and %lld, got %.0f", name, lo, hi, d);
    *out = (long long)d;
    return 0;
}

static int get_num(const cJSON *root, const char *name, double lo, double hi, int lo_open,
                   float *out, srv_error *e)
{
    cJSON *v = field(root, name);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return BAD(name, "'%s' must be a number", name);
    double d = v->valuedouble;
    if (d > hi || (lo_open ? d <= lo : d < lo))
        return BAD(name, "'%s' must be %s %g and <= %g, got %g", name, lo_open ? ">" : ">=", lo, hi,
                   d);
    *out = (float)d;
    return 0;
}

static int ids_from_array(const cJSON *arr, const srv_limits *lim, const char *param,
                          srv_prompt *out, srv_error *e)
{
    int n = cJSON_GetArraySize(arr);
    out->ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    out->n = 0;
    if (!out->ids) {
        srv_error_set(e, SRV_ERR_INTERNAL, param, "out of memory");
        return -1;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, arr)
    {
        if (!is_integer(t))
            return BAD(param, "'%s' must hold integer token ids", param);
        if (t->valuedouble < 0 || t->valuedouble >= lim->vocab_size)
            return BAD(param, "token id %.0f in '%s' is outside the vocabulary [0, %d)",
                       t->valuedouble, param, lim->vocab_size);
        out->ids[out->n++] = (int32_t)t->valuedouble;
    }
    return 0;
}

static int ids_from_text(const cJSON *s, const srv_limits *lim, srv_prompt *out, srv_error *e)
{
    char msg[256];
    int rc = srv_codec_encode(lim->codec, s->valuestring, strlen(s->valuestring), 1, &out->ids,
                              &out->n, msg, sizeof msg);
    if (rc)
        srv_error_set(e, rc == -2 ? SRV_ERR_INTERNAL : SRV_ERR_INVALID, "prompt", "%s", msg);
    return rc ? -1 : 0;
}

static int parse_prompt(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *pr = field(root, "prompt");
    if (!pr)
        return BAD("prompt", "'prompt' is required");
    const char *shape = "'prompt' must be a string, an array of strings, an array of token ids "
                        "or an array of arrays of token ids";
    if (cJSON_IsString(pr)) {
        p->prompts = calloc(1, sizeof *p->prompts);
        if (!p->prompts)
            return OOM("prompt");
        p->n_prompts = 1;
        return ids_from_text(pr, lim, &p->prompts[0], e);
    }
    if (!cJSON_IsArray(pr))
        return BAD("prompt", "%s", shape);
    int n = cJSON_GetArraySize(pr);
    if (n == 0)
        return BAD("prompt", "'prompt' must not be empty");
    const cJSON *first = cJSON_GetArrayItem(pr, 0);
    if (cJSON_IsNumber(first)) { /* one prompt of ids */
        p->prompts = calloc(1, sizeof *p->prompts);
        if (!p->prompts)
            return OOM("prompt");
        p->n_prompts = 1;
        return ids_from_array(pr, lim, "prompt", &p->prompts[0], e);
    }
    if (n > SRV_MAX_PROMPTS)
        return BAD("prompt", "at most %d prompts per request, got %d", SRV_MAX_PROMPTS, n);
    p->prompts = calloc((size_t)n, sizeof *p->prompts);
    if (!p->prompts)
        return OOM("prompt");
    p->n_prompts = n;
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, pr)
    {
        if (cJSON_IsString(it)) {
            if (ids_from_text(it, lim, &p->prompts[k], e))
                return -1;
        } else if (cJSON_IsArray(it)) {
            if (ids_from_array(it, lim, "prompt", &p->prompts[k], e))
                return -1;
        } else {
            return BAD("prompt", "%s", shape);
        }
        k++;
    }
    return 0;
}

static int parse_stop(const cJSON *root, srv_params *p, srv_error *e)
{
    const cJSON *st = field(root, "stop");
    if (!st)
        return 0;
    if (cJSON_IsString(st)) {
        if (!st->valuestring[0])
            return BAD("stop", "'stop' strings must not be empty");
        p->stop[0] = strdup(st->valuestring);
        if (!p->stop[0])
            return OOM("stop");
        p->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(st))
        return BAD("stop", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(st) > SRV_MAX_STOP)
        return BAD("stop", "'stop' holds at most %d strings", SRV_MAX_STOP);
    const cJSON *it;
    cJSON_ArrayForEach(it, st)
    {
        if (!cJSON_IsString(it))
            return BAD("stop", "'stop' must be a string or an array of strings");
        if (!it->valuestring[0])
            return BAD("stop", "'stop' strings must not be empty");
        p->stop[p->n_stop] = strdup(it->valuestring);
        if (!p->stop[p->n_stop])
            return OOM("stop");
        p->n_stop++;
    }
    return 0;
}

static int parse_logit_bias(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *lb = field(root, "logit_bias");
    if (!lb)
        return 0;
    if (!cJSON_IsObject(lb))
        return BAD("logit_bias", "'logit_bias' must be an object mapping token ids to numbers");
    int n = cJSON_GetArraySize(lb);
    if (n > 4096)
        return BAD("logit_bias", "'logit_bias' holds at most 4096 entries");
    p->bias = calloc((size_t)(n > 0 ? n : 1), sizeof *p->bias);
    if (!p->bias)
        return OOM("logit_bias");
    const cJSON *it;
    cJSON_ArrayForEach(it, lb)
    {
        /* digits only: " 5" and "+5" are not token ids */
        size_t nd = strspn(it->string, "0123456789");
        char *end;
        long id = nd > 0 && nd <= 9 && !it->string[nd] ? strtol(it->string, &end, 10) : -1;
        if (id < 0 || id >= lim->vocab_size)
            return BAD("logit_bias", "'logit_bias' key '%.32s' is not a token id in [0, %d)",
                       it->string, lim->vocab_size);
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -100 && it->valuedouble <= 100))
            return BAD("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
        p->bias[p->n_bias].id = (int32_t)id;
        p->bias[p->n_bias].bias = (float)it->valuedouble;
        p->n_bias++;
    }
    return 0;
}

static int parse_model(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *m = field(root, "model");
    if (!m)
        return 0;
    if (!cJSON_IsString(m))
        return BAD("model", "'model' must be a string");
    if (strcmp(m->valuestring, lim->model_name) != 0) {
        srv_error_set(e, SRV_ERR_MODEL_NOT_FOUND, "model",
                      "The model '%.200s' does not exist; this server serves '%.200s'",
                      m->valuestring, lim->model_name);
        return -1;
    }
    p->model = strdup(m->valuestring);
    return p->model ? 0 : OOM("model");
}

/* max_tokens (on chat also max_completion_tokens, its synonym; unset, the
 * rest of the context), n (and best_of, which must equal n). */
static int parse_counts(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    long long v = p->chat ? 0 : 16, w = 0;
    if (get_int(root, "max_tokens", 1, lim->max_positions, &v, e) ||
        (p->chat && get_int(root, "max_completion_tokens", 1, lim->max_positions, &w, e)))
        return -1;
    if (w && v && w != v)
        return BAD("max_completion_tokens",
                   "'max_tokens' (%lld) and 'max_completion_tokens' (%lld) differ; send one", v, w);
    if (!v)
        v = w ? w : lim->max_positions - p->prompts[0].n;
    p->max_tokens = v < 1 ? 1 : (int)v;
    v = 1;
    if (get_int(root, "n", 1, SRV_MAX_N, &v, e))
        return -1;
    p->n = (int)v;
    v = 0;
    cJSON *bo = field(root, "best_of");
    if (bo && get_int(root, "best_of", p->n, p->n, &v, e))
        return -1;
    if ((long long)p->n * p->n_prompts > lim->max_running)
        return BAD("n", "n x prompts = %lld sequences exceeds the server's limit of %d",
                   (long long)p->n * p->n_prompts, lim->max_running);
    return 0;
}

static int parse_sampling(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    if (get_num(root, "temperature", 0, 2, 0, &p->sampling.temperature, e) ||
        get_num(root, "top_p", 0, 1, 1, &p->sampling.top_p, e) ||
        get_num(root, "min_p", 0, 1, 0, &p->sampling.min_p, e) ||
        get_num(root, "presence_penalty", -2, 2, 0, &p->sampling.presence_penalty, e) ||
        get_num(root, "frequency_penalty", -2, 2, 0, &p->sampling.frequency_penalty, e) ||
        get_num(root, "repetition_penalty", 0, 10, 1, &p->sampling.repetition_penalty, e))
        return -1;
    long long v = p->sampling.top_k;
    if (get_int(root, "top_k", -1, lim->vocab_size, &v, e))
        return -1;
    p->sampling.top_k = v < 0 ? 0 : (int)v;
    return 0;
}

/* stream, echo, ignore_eos, return_token_ids, stream_options. */
static int parse_switches(const cJSON *root, srv_params *p, srv_error *e)
{
    if (get_bool(root, "stream", &p->stream, e) || get_bool(root, "echo", &p->echo, e) ||
        get_bool(root, "ignore_eos", &p->ignore_eos, e) ||
        get_bool(root, "return_token_ids", &p->return_token_ids, e))
        return -1;
    const cJSON *so = field(root, "stream_options");
    if (!so)
        return 0;
    if (!cJSON_IsObject(so))
        return BAD("stream_options", "'stream_options' must be an object");
    if (!p->stream)
        return BAD("stream_options", "'stream_options' is only allowed with stream: true");
    const cJSON *iu = field(so, "include_usage");
    if (iu && !cJSON_IsBool(iu))
        return BAD("stream_options.include_usage",
                   "'stream_options.include_usage' must be a boolean");
    p->include_usage = iu && cJSON_IsTrue(iu);
    return 0;
}

/* Chat's logprobs: a boolean, with top_logprobs alternatives (0 to 20). */
static int parse_chat_logprobs(const cJSON *root, srv_params *p, srv_error *e)
{
    int on = 0;
    long long k = -1;
    if (get_bool(root, "logprobs", &on, e) || get_int(root, "top_logprobs", 0, 20, &k, e))
        return -1;
    if (k >= 0 && !on)
        return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p->logprobs = on ? (k < 0 ? 0 : (int)k) : -1;
    return 0;
}

/* logprobs, seed, user. */
static int parse_extras(const cJSON *root, srv_params *p, srv_error *e)
{
    long long v = -1;
    if (p->chat ? parse_chat_logprobs(root, p, e) : get_int(root, "logprobs", 0, 20, &v, e))
        return -1;
    if (!p->chat)
        p->logprobs = (int)v;
    const cJSON *sd = field(root, "seed");
    if (sd) {
        if (!is_integer(sd))
            return BAD("seed", "'seed' must be an integer");
        p->has_seed = 1;
        p->seed = (uint64_t)(int64_t)sd->valuedouble;
    }
    const cJSON *u = field(root, "user");
    if (u) {
        if (!cJSON_IsString(u))
            return BAD("user", "'user' must be a string");
        p->user = strdup(u->valuestring);
        if (!p->user)
            return OOM("user");
    }
    return 0;
}

/* Every prompt holds a token and fits the context with max_tokens. */
static int check_lengths(const srv_limits *lim, const srv_params *p, srv_error *e)
{
    for (int i = 0; i < p->n_prompts; i++) {
        long long need = (long long)p->prompts[i].n + p->max_tokens;
        if (p->prompts[i].n == 0)
            return BAD(p->chat ? "messages" : "prompt", "the prompt must hold at least one token");
        if (need > lim->max_positions) {
            srv_error_set(e, SRV_ERR_CONTEXT, p->chat ? "messages" : "prompt",
                          "This model's maximum context length is %d tokens. However, you "
                          "requested %lld tokens (%d in the prompt, %d for the completion). "
                          "Reduce the prompt or max_tokens.",
                          lim->max_positions, need, p->prompts[i].n, p->max_tokens);
            return -1;
        }
    }
    return 0;
}

/* Fields a client sends expecting an effect this server does not have: each
 * refused with why, so no answer pretends to honour it. */
typedef struct {
    const char *name, *why;
} refusal;

static const refusal refused[] = {
    {"suffix", "text after the completion (insertion) is not supported"},
    {"tools", "tool calls are a chat feature: send them to /v1/chat/completions"},
    {"tool_choice", "tool calls are a chat feature: send them to /v1/chat/completions"},
    {"parallel_tool_calls", "tool calls are a chat feature: send them to /v1/chat/completions"},
    {"functions", "function calls are not supported"},
    {"function_call", "function calls are not supported"},
    {"messages", "'messages' belongs to /v1/chat/completions; send 'prompt' here"},
    {"audio", "audio output is not supported"},
    {"modalities", "output modalities other than text are not supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
};

/* Chat's refusals: tool calls and the rest not served yet, completions' own fields. */
static const refusal refused_chat[] = {
    {"functions", "the deprecated function calls are not supported: use 'tools'"},
    {"function_call", "the deprecated function calls are not supported: use 'tool_choice'"},
    {"audio", "audio output is not supported"},
    {"modalities", "output modalities other than text are not supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"suffix", "text after the completion (insertion) is not supported"},
    {"echo", "not a chat field (it belongs to /v1/completions)"},
    {"prompt", "'prompt' belongs to /v1/completions; send 'messages' here"},
};

/* What an endpoint refuses and knows besides the fields both know. */
typedef struct {
    const refusal *refused;
    size_t n_refused;
    const char *const *own;
    size_t n_own;
} field_rules;

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const known_both[] = {"model",
                                         "max_tokens",
                                         "n",
                                         "best_of",
                                         "temperature",
                                         "top_p",
                                         "top_k",
                                         "min_p",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "repetition_penalty",
                                         "logit_bias",
                                         "seed",
                                         "stop",
                                         "stream",
                                         "stream_options",
                                         "logprobs",
                                         "ignore_eos",
                                         "return_token_ids",
                                         "user",
                                         "response_format",
                                         "grammar",
                                         "json_schema"};
static const char *const known_completions[] = {"prompt", "echo"};
static const char *const known_chat[] = {
    "messages", "max_completion_tokens", "top_logprobs",       "chat_template_kwargs",
    "tools",    "tool_choice",           "parallel_tool_calls"};
static const field_rules completion_rules = {refused, N_OF(refused), known_completions,
                                             N_OF(known_completions)};
static const field_rules chat_rules = {refused_chat, N_OF(refused_chat), known_chat,
                                       N_OF(known_chat)};

static int in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(name, list[k]))
            return 1;
    return 0;
}

/* Unknown fields: one the endpoint does not implement is refused; any other
 * is accepted, and logged (once per name, at debug level). */
static int check_fields(const cJSON *root, const field_rules *r, srv_error *e)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, root)
    {
        for (size_t i = 0; i < r->n_refused; i++)
            if (!strcmp(f->string, r->refused[i].name) && !cJSON_IsNull(f))
                return BAD(r->refused[i].name, "'%s': %s", r->refused[i].name, r->refused[i].why);
        if (!in_list(f->string, known_both, N_OF(known_both)) &&
            !in_list(f->string, r->own, r->n_own))
            srv_log_unknown_field(f->string);
    }
    return 0;
}

/* messages rendered with the server's chat template, encoded without
 * special tokens (the template writes them): the one prompt. */
static int parse_messages(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *kw = field(root, "chat_template_kwargs");
    if (kw && !cJSON_IsObject(kw))
        return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (!lim->chat) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "this server has no chat template");
        return -1;
    }
    cJSON *msgs = NULL;
    const cJSON *tools = NULL;
    char *text = NULL, msg[256];
    size_t len = 0;
    if (srv_chat_tools_parse(root, lim->chat, lim->grammars, p, &tools, e) ||
        srv_chat_messages_parse(root, &msgs, e) ||
        lim->chat->render(lim->chat, msgs, tools, kw, &text, &len, e))
        return -1;
    p->prompts = calloc(1, sizeof *p->prompts);
    if (!p->prompts) {
        free(text);
        return OOM("messages");
    }
    p->n_prompts = 1;
    int rc = srv_codec_encode(lim->codec, text, len, 0, &p->prompts[0].ids, &p->prompts[0].n, msg,
                              sizeof msg);
    free(text);
    if (rc)
        srv_error_set(e, rc == -2 ? SRV_ERR_INTERNAL : SRV_ERR_INVALID, "messages", "%s", msg);
    return rc ? -1 : 0;
}

static int parse(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    if (!cJSON_IsObject(root))
        return BAD(NULL, "the request body must be a JSON object");
    if (check_fields(root, p->chat ? &chat_rules : &completion_rules, e))
        return -1;
    if (parse_model(root, lim, p, e) ||
        (p->chat ? parse_messages(root, lim, p, e) : parse_prompt(root, lim, p, e)) ||
        parse_counts(root, lim, p, e) || parse_sampling(root, lim, p, e) ||
        parse_switches(root, p, e) || parse_extras(root, p, e) || parse_stop(root, p, e) ||
        parse_logit_bias(root, lim, p, e) || srv_params_format(root, lim, p, e))
        return -1;
    return check_lengths(lim, p, e);
}

/* Either endpoint's body: chat selects which. */
static int parse_body(const char *body, size_t len, const srv_limits *lim, int chat, srv_params *p,
                      srv_error *e)
{
    memset(p, 0, sizeof *p);
    p->chat = chat;
    p->n = 1;
    p->max_tokens = 16;
    p->logprobs = -1;
    p->sampling = lim->gen->defaults; /* generation_config.json's, else OpenAI's */
    p->sampling.logit_bias = NULL;
    cJSON *root = srv_json_parse_body(body, len, e);
    if (!root)
        return -1;
    int rc = parse(root, lim, p, e);
    cJSON_Delete(root);
    if (rc)
        srv_params_free(p);
    else
        p->prompt_logprobs = p->echo && p->logprobs >= 0;
    return rc;
}

int srv_params_parse(const char *body, size_t len, const srv_limits *lim, srv_params *p,
                     srv_error *e)
{
    return parse_body(body, len, lim, 0, p, e);
}

int srv_chat_params_parse(const char *body, size_t len, const srv_limits *lim, srv_params *p,
                          srv_error *e)
{
    return parse_body(body, len, lim, 1, p, e);
}

void srv_params_free(srv_params *p)
{
    if (p->prompts)
        for (int i = 0; i < p->n_prompts; i++)
            free(p->prompts[i].ids);
    free(p->prompts);
    for (int i = 0; i < p->n_stop; i++)
        free(p->stop[i]);
    free(p->model);
    free(p->user);
    free(p->bias);
    srv_grammar_ref_release(p->grammar);
    memset(p, 0, sizeof *p);
}
