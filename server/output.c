/*
 * output.c — a chosen token's way to its client, on the engine thread: the
 * choice's streaming decoder turns it into text, the stop strings hold back
 * what could still start one, the latency histograms take its time, and the
 * request gets the token with its text and logprobs. A chat request with
 * tools has its text split into content and tool calls (tool_parse.c) on
 * the way. A choice ends here at its end-of-sequence token, a stop string
 * or max_tokens.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory while emitting text");
    return -1;
}

int srv_output_start(srv_output *o, srv_req *r, int ci, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    if (srv_codec_stream_new(o->codec, &c->dec, err, errlen))
        return -1;
    /* text_offset counts the echoed prompt too */
    c->dec_chars = r->echo ? srv_utf8_chars(r->echo[c->group], strlen(r->echo[c->group])) : 0;
    srv_stopper_init(&c->stopper, r->p.stop, r->p.n_stop);
    if (r->p.tool_format != SRV_TOOLS_NONE && !(c->tools = srv_tool_parser_new(r->p.tool_format)))
        return oom(err, errlen);
    srv_req_set_decoding(r, ci);
    return 0;
}

/* A call's id, the same for the same request, choice and call: 9 letters
 * and digits for mistral (its templates refuse other ids), else "call_"
 * and 24 of them, as OpenAI's look. */
static void call_id(const srv_req *r, int ci, int k, srv_tool_format f, char *out, size_t outlen)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the request id, then the numbers mixed in */
    for (const char *s = r->id; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h ^= ((uint64_t)ci << 32) ^ (uint64_t)k;
    size_t n = f == SRV_TOOLS_MISTRAL ? 9 : 24, at = 0;
    if (f != SRV_TOOLS_MISTRAL)
        at = (size_t)snprintf(out, outlen, "call_");
    for (size_t i = 0; i < n && at + 1 < outlen; i++) {
        h += 0x9e3779b97f4a7c15ull; /* splitmix64 */
        uint64_t z = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        out[at++] = alnum[(z ^ (z >> 31)) % (sizeof alnum - 1)];
    }
    out[at] = 0;
}

/* {name, arguments} as OpenAI's {id, type: "function", function: {name, arguments}}. */
static cJSON *openai_call(const srv_req *r, int ci, int k, cJSON *raw)
{
    char id[40];
    call_id(r, ci, k, r->p.tool_format, id, sizeof id);
    cJSON *call = cJSON_CreateObject();
    int ok = call && cJSON_AddStringToObject(call, "id", id) &&
             cJSON_AddStringToObject(call, "type", "function");
    if (ok && cJSON_AddItemToObject(call, "function", raw))
        return call;
    cJSON_Delete(call); /* raw is not in it: adding failed before attaching */
    cJSON_Delete(raw);
    return NULL;
}

/* The tool-call split of o->emit: its content into o->content, the calls it
 * completes into o->calls (beyond the first dropped with single_tool_call).
 * A choice that ended on its own and made calls ends with "tool_calls". */
static int split_tools(srv_output *o, srv_req *r, int ci, const char **finish, char *err,
                       size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    cJSON *raw = cJSON_CreateArray();
    int before = srv_tool_parser_calls(c->tools);
    o->content.len = 0;
    if (!o->calls)
        o->calls = cJSON_CreateArray();
    int rc = !raw || !o->calls ||
             srv_tool_feed(c->tools, o->emit.p, o->emit.len, &o->content, raw) ||
             (*finish && srv_tool_finish(c->tools, &o->content, raw));
    for (int k = before; !rc && raw->child; k++) {
        cJSON *one = cJSON_DetachItemViaPointer(raw, raw->child);
        if (r->p.single_tool_call && k > 0) {
            cJSON_Delete(one);
            continue;
        }
        cJSON *call = openai_call(r, ci, k, one);
        rc = !call || !cJSON_AddItemToArray(o->calls, call);
    }
    cJSON_Delete(raw);
    if (rc)
        return oom(err, errlen);
    if (*finish && !strcmp(*finish, "stop") && srv_tool_parser_calls(c->tools) > 0)
        *finish = "tool_calls";
    return 0;
}

/* Decodes token tok of choice c through its stop strings into o->emit;
 * *reason is set when the choice ends here. */
static int emit_text(srv_output *o, srv_choice *c, int32_t tok, int is_eos, int last,
                     const char **reason, char *err, size_t errlen)
{
    const char *piece;
    size_t len;
    o->emit.len = 0;
    *reason = is_eos ? "stop" : NULL;
    if (!is_eos) {
        if (srv_codec_stream_push(c->dec, tok, &piece, &len, err, errlen))
            return -1;
        c->dec_chars += srv_utf8_chars(piece, len);
        int st = srv_stopper_feed(&c->stopper, piece, len, &o->emit);
        if (st < 0)
            return oom(err, errlen);
        if (st == 1)
            *reason = "stop";
        if (st == 1 || !last)
            return 0;
    }
    if (srv_codec_stream_finish(c->dec, &piece, &len, err, errlen))
        return -1;
    int st = srv_stopper_feed(&c->stopper, piece, len, &o->emit);
    if (st < 0 || (st == 0 && srv_stopper_flush(&c->stopper, &o->emit)))
        return oom(err, errlen);
    if (!*reason)
        *reason = st == 1 ? "stop" : "length";
    return 0;
}

static void observe_latency(srv_req *r, srv_choice *c)
{
    double now = mhla_now();
    if (c->n_ids > 0)
        srv_metrics_observe(SRV_HIST_ITL, now - c->t_last);
    else if (r->t_first == 0) {
        r->t_first = now;
        srv_metrics_observe(SRV_HIST_TTFT, now - r->t_arrive);
    }
    c->t_last = now;
    srv_metrics_tokens(0, 1);
}

int srv_output_token(srv_output *o, srv_req *r, int ci, const mhla_sample_slot *sl, char *err,
                     size_t errlen)
{
    if (sl->status != MHLA_SLOT_OK) {
        snprintf(err, errlen, "%s", sl->err.msg);
        return -1;
    }
    srv_choice *c = &r->choices[ci];
    int32_t tok = sl->token;
    srv_token t = {.id = tok,
                   .lp = {.logprob = sl->token_logprob, .text_offset = c->dec_chars},
                   .top = sl->top};
    observe_latency(r, c);
    int is_eos = srv_gen_is_eos(o->gen, tok) && !r->p.ignore_eos;
    int last = is_eos || c->n_ids + 1 >= r->p.max_tokens;
    if (emit_text(o, c, tok, is_eos, last, &t.finish, err, errlen))
        return -1;
    t.text = o->emit.p;
    t.len = o->emit.len;
    if (c->tools) {
        if (split_tools(o, r, ci, &t.finish, err, errlen))
            return -1;
        t.text = o->content.p;
        t.len = o->content.len;
        t.calls = o->calls;
    }
    if (srv_req_push_token(r, ci, &t))
        return oom(err, errlen);
    if (!t.finish) {
        c->last_tok = tok;
        return 0;
    }
    if (o->state_pool) { /* its end state stays for resume */
        mhla_seq_finish(c->seq);
        c->seq = NULL;
    }
    srv_choice_free_engine(c);
    return 0;
}

void srv_output_free(srv_output *o)
{
    mhla_buf_free(&o->emit);
    mhla_buf_free(&o->content);
    cJSON_Delete(o->calls);
    o->calls = NULL;
}
