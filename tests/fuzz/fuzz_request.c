/*
 * libFuzzer target for the completion request parser (srv_params_parse, what
 * POST /v1/completions runs on a body): any body ends in parameters that keep
 * the documented limits, or in one OpenAI-shape error of status 400 or 404;
 * never a crash, overflow or leak. Parsed parameters also become a request
 * object (srv_req_create) and are released.
 *
 * The first byte picks the text codec (bit 0: the byte-level stand-in, or the
 * tokenizer.json in MHLA_FUZZ_MODEL_DIR) and the limits (bits 1-2); the rest
 * is the body.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static srv_codec *codecs[2];
static int vocab[2];
static srv_gen_config gen;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_request: " __VA_ARGS__);                                             \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[512];
    const char *dir = getenv("MHLA_FUZZ_MODEL_DIR");
    if (!dir) {
        fprintf(stderr, "fuzz_request: set MHLA_FUZZ_MODEL_DIR to a folder with tokenizer.json\n");
        exit(2);
    }
    vocab[0] = 300;
    vocab[1] = 4096;
    if (srv_codec_create("/nonexistent-fuzz-model", vocab[0], &codecs[0], err, sizeof err) ||
        srv_codec_create(dir, vocab[1], &codecs[1], err, sizeof err)) {
        fprintf(stderr, "fuzz_request: %s\n", err);
        exit(2);
    }
    memset(&gen, 0, sizeof gen);
    mhla_sampling_defaults(&gen.defaults);
    gen.eos[0] = 0;
    gen.n_eos = 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] & 1;
    static const int positions[4] = {2048, 64, 1, 100000};
    static const int running[4] = {64, 4, 1, 256};
    srv_limits lim = {codecs[which],
                      &gen,
                      "demo",
                      vocab[which],
                      positions[(data[0] >> 1) & 3],
                      running[(data[0] >> 1) & 3]};
    /* the body in a buffer of its own size, so that reads past it are caught */
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    memcpy(body, data + 1, len);
    srv_params p;
    srv_error e;
    memset(&e, 0, sizeof e);
    if (srv_params_parse(body, len, &lim, &p, &e) != 0) {
        int status = srv_error_status(e.code);
        if (status != 400 && status != 404)
            FAIL("refused with status %d (%s)", status, e.message);
        if (!e.message[0])
            FAIL("an error without a message");
        char *js = srv_error_json(&e);
        cJSON *o = js ? cJSON_Parse(js) : NULL;
        if (!o || !cJSON_IsObject(cJSON_GetObjectItem(o, "error")))
            FAIL("the error body is not an OpenAI error object: %s", js ? js : "(null)");
        cJSON_Delete(o);
        free(js);
        free(body);
        return 0;
    }
    /* accepted: every documented limit holds */
    if (p.n_prompts < 1 || p.n_prompts > SRV_MAX_PROMPTS || p.n < 1 || p.n > SRV_MAX_N ||
        (long)p.n * p.n_prompts > lim.max_running)
        FAIL("accepted %d prompts x n=%d", p.n_prompts, p.n);
    if (p.max_tokens < 1 || p.max_tokens > lim.max_positions)
        FAIL("accepted max_tokens %d", p.max_tokens);
    for (int i = 0; i < p.n_prompts; i++) {
        if (p.prompts[i].n < 1 || (long)p.prompts[i].n + p.max_tokens > lim.max_positions)
            FAIL("accepted a prompt of %d tokens with max_tokens %d", p.prompts[i].n, p.max_tokens);
        for (int k = 0; k < p.prompts[i].n; k++)
            if (p.prompts[i].ids[k] < 0 || p.prompts[i].ids[k] >= lim.vocab_size)
                FAIL("accepted token id %d", (int)p.prompts[i].ids[k]);
    }
    if (p.n_stop < 0 || p.n_stop > SRV_MAX_STOP)
        FAIL("accepted %d stop strings", p.n_stop);
    for (int i = 0; i < p.n_stop; i++)
        if (!p.stop[i] || !p.stop[i][0])
            FAIL("accepted an empty stop string");
    for (int i = 0; i < p.n_bias; i++)
        if (p.bias[i].id < 0 || p.bias[i].id >= lim.vocab_size || !(p.bias[i].bias >= -100) ||
            !(p.bias[i].bias <= 100))
            FAIL("accepted logit_bias %d: %g", (int)p.bias[i].id, (double)p.bias[i].bias);
    if (p.logprobs < -1 || p.logprobs > 20)
        FAIL("accepted logprobs %d", p.logprobs);
    const mhla_sampling_params *s = &p.sampling;
    if (!(s->temperature >= 0 && s->temperature <= 2) || !(s->top_p > 0 && s->top_p <= 1) ||
        !(s->min_p >= 0 && s->min_p <= 1) || s->top_k < 0 || s->top_k > lim.vocab_size ||
        !(s->repetition_penalty > 0 && s->repetition_penalty <= 10))
        FAIL("accepted sampling parameters out of range");
    if (p.include_usage && !p.stream)
        FAIL("accepted stream_options without stream");
    /* the sampler takes them too */
    mhla_sampling_params sp = p.sampling;
    sp.logit_bias = p.bias;
    sp.n_logit_bias = p.n_bias;
    mhla_sampler *smp = NULL;
    mhla_error merr;
    if (mhla_sampler_create(&sp, lim.vocab_size, p.prompts[0].ids, p.prompts[0].n, &smp, &merr))
        FAIL("the sampler refuses accepted parameters: %s", merr.msg);
    mhla_sampler_free(smp);
    srv_req *r = NULL;
    srv_error re;
    if (srv_req_create(&p, codecs[which], &r, &re) == 0)
        srv_req_release(r);
    free(body);
    return 0;
}
