/*
 * output.c — a chosen token's way to its client, on the engine thread: the
 * choice's streaming decoder turns it into text, the stop strings hold back
 * what could still start one, the latency histograms take its time, and the
 * request gets the token with its text and logprobs. A choice ends here at
 * its end-of-sequence token, a stop string or max_tokens.
 */
#include "server_internal.h"

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
    srv_req_set_decoding(r, ci);
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

void srv_output_free(srv_output *o) { mhla_buf_free(&o->emit); }
