/*
 * request_echo.c — what a request with echo holds before it is queued: each
 * prompt decoded as generated text is (special tokens skipped, the pieces of
 * the streaming decoder), and with prompt logprobs the room for them and
 * every prompt token's character offset, so that the engine thread only
 * fills in numbers.
 */
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Room for prompt g's own logprobs. */
static int alloc_prompt_logprobs(srv_req *r, int g)
{
    int K = r->p.logprobs, n = r->p.prompts[g].n;
    srv_group *gr = &r->groups[g];
    gr->prompt_logprob = calloc((size_t)n, sizeof *gr->prompt_logprob);
    gr->prompt_offset = calloc((size_t)n, sizeof *gr->prompt_offset);
    gr->prompt_tops = K ? calloc((size_t)n * (size_t)K, sizeof *gr->prompt_tops) : NULL;
    return !gr->prompt_logprob || !gr->prompt_offset || (K && !gr->prompt_tops) ? -1 : 0;
}

/* Prompt g decoded into *out; with prompt logprobs every token's character
 * offset. Returns 0, or -1 with e set. */
static int echo_prompt(srv_req *r, const srv_codec *codec, int g, char **out, srv_error *e)
{
    const srv_prompt *pr = &r->p.prompts[g];
    long *offset = r->groups[g].prompt_offset;
    srv_codec_stream *st = NULL;
    char msg[256];
    if (srv_codec_stream_new(codec, &st, msg, sizeof msg)) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "%s", msg);
        return -1;
    }
    mhla_buf text = {0};
    long chars = 0;
    int bad = 0, oom = 0;
    const char *piece;
    size_t len;
    for (int t = 0; t < pr->n && !bad && !oom; t++) {
        if (offset)
            offset[t] = chars;
        bad = srv_codec_stream_push(st, pr->ids[t], &piece, &len, msg, sizeof msg);
        oom = !bad && mhla_buf_put(&text, piece, len);
        chars += bad ? 0 : srv_utf8_chars(piece, len);
    }
    if (!bad && !oom)
        bad = srv_codec_stream_finish(st, &piece, &len, msg, sizeof msg);
    oom = oom || (!bad && (mhla_buf_put(&text, piece, len) || mhla_buf_put(&text, "", 0)));
    srv_codec_stream_free(st);
    if (bad || oom) {
        mhla_buf_free(&text);
        if (oom)
            srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory decoding the prompt");
        else
            srv_error_set(e, SRV_ERR_INVALID, "prompt", "%s", msg);
        return -1;
    }
    *out = text.p;
    return 0;
}

int srv_req_echo_prompts(srv_req *r, const srv_codec *codec, srv_error *e)
{
    r->echo = calloc((size_t)r->p.n_prompts, sizeof *r->echo);
    if (!r->echo) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory");
        return -1;
    }
    for (int g = 0; g < r->p.n_prompts; g++) {
        if (r->p.prompt_logprobs && alloc_prompt_logprobs(r, g)) {
            srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory for the prompt's logprobs");
            return -1;
        }
        if (echo_prompt(r, codec, g, &r->echo[g], e))
            return -1;
    }
    return 0;
}
