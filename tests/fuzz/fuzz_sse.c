/*
 * libFuzzer target for the response writers: the SSE stream of a streaming
 * completion (srv_sse_read, with the chunks of response.c) and the
 * non-streaming body (srv_completion_json). The input plays the engine
 * thread: it shapes a request (choices, echo, logprobs, usage, token ids),
 * then appends text and token ids to its choices, finishes or fails them,
 * and reads the stream in pieces of its own sizes in between. Whatever it
 * does, the stream must be `data: JSON\n\n` events ending in
 * `data: [DONE]\n\n`; per choice, the texts concatenated are the echo plus
 * the choice's text, the token ids are its ids, finish_reason comes once, in
 * its last chunk; a failed request ends in an error object; the usage chunk
 * comes when asked for. The non-streaming body carries the same texts and ids.
 *
 * The text codec is the byte-level stand-in (vocabulary 300), so any id
 * decodes; text is cut to whole UTF-8 characters, as the engine thread's is.
 */
#include "server_internal.h"
#include "fuzz_utf8.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_sse: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#define VOCAB 300
static srv_codec *codec;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    if (srv_codec_create("/nonexistent-fuzz-model", VOCAB, &codec, err, sizeof err)) {
        fprintf(stderr, "fuzz_sse: %s\n", err);
        exit(2);
    }
    return 0;
}

typedef struct {
    const uint8_t *p, *end;
} input;

static unsigned take(input *in) { return in->p < in->end ? *in->p++ : 0; }

/* The client side. A read when nothing is new makes the writer wait; after a
 * quarter second it asks whether the client is still there: here it has
 * gone, so the stream must end there, cut, with the request cancelled. */
static int client_left;
static int gone(void *ctx)
{
    (void)ctx;
    client_left = 1;
    return 0;
}

static void add_token(srv_choice *c, int K, int32_t id, float lp, long off)
{
    if (c->n_ids == c->cap_ids) {
        int cap = c->cap_ids ? 2 * c->cap_ids : 8;
        c->ids = realloc(c->ids, (size_t)cap * sizeof *c->ids);
        c->lp = realloc(c->lp, (size_t)cap * sizeof *c->lp);
        c->tops = realloc(c->tops, (size_t)cap * (size_t)(K ? K : 1) * sizeof *c->tops);
        c->cap_ids = cap;
    }
    c->ids[c->n_ids] = id;
    c->lp[c->n_ids].logprob = lp;
    c->lp[c->n_ids].text_offset = off;
    for (int k = 0; k < K; k++) {
        c->tops[(size_t)c->n_ids * (size_t)K + (size_t)k].id = (int32_t)((id + k) % VOCAB);
        c->tops[(size_t)c->n_ids * (size_t)K + (size_t)k].logprob = lp - (float)k;
    }
    c->n_ids++;
}

/* The decoded "text" values of a JSON text, in order, NUL bytes included
 * (cJSON's strings end at a NUL, so they are read here from the raw JSON). */
static int json_texts(const char *s, size_t n, mhla_buf *out, int max)
{
    int found = 0;
    size_t i = 0;
    while (i < n) {
        if (s[i] != '"') {
            i++;
            continue;
        }
        size_t start = ++i;
        while (i < n && s[i] != '"')
            i += s[i] == '\\' ? 2 : 1;
        size_t klen = i - start;
        i++;
        size_t j = i;
        while (j < n && s[j] == ' ')
            j++;
        if (!(klen == 4 && memcmp(s + start, "text", 4) == 0 && j < n && s[j] == ':'))
            continue;
        j++;
        while (j < n && s[j] == ' ')
            j++;
        if (j >= n || s[j] != '"')
            FAIL("\"text\" is not a string");
        j++;
        mhla_buf *b = found < max ? &out[found] : NULL;
        while (j < n && s[j] != '"') {
            char c = s[j++];
            if (c != '\\') {
                if (b)
                    mhla_buf_put(b, &c, 1);
                continue;
            }
            char e = j < n ? s[j++] : 0;
            static const char esc[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *simple = e ? strchr(esc, e) : NULL;
            if (simple) {
                if (b)
                    mhla_buf_put(b, &to[simple - esc], 1);
                continue;
            }
            if (e != 'u' || j + 4 > n)
                FAIL("a bad escape in a JSON string");
            unsigned cp =
                (unsigned)strtoul((char[5]){s[j], s[j + 1], s[j + 2], s[j + 3], 0}, NULL, 16);
            j += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && j + 6 <= n && s[j] == '\\' && s[j + 1] == 'u') {
                unsigned lo =
                    (unsigned)strtoul((char[5]){s[j + 2], s[j + 3], s[j + 4], s[j + 5], 0}, NULL,
                                      16);
                j += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            char u[4];
            size_t ul;
            if (cp < 0x80) {
                u[0] = (char)cp;
                ul = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xC0 | cp >> 6);
                u[1] = (char)(0x80 | (cp & 0x3F));
                ul = 2;
            } else if (cp < 0x10000) {
                u[0] = (char)(0xE0 | cp >> 12);
                u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[2] = (char)(0x80 | (cp & 0x3F));
                ul = 3;
            } else {
                u[0] = (char)(0xF0 | cp >> 18);
                u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                u[3] = (char)(0x80 | (cp & 0x3F));
                ul = 4;
            }
            if (b)
                mhla_buf_put(b, u, ul);
        }
        found++;
        i = j + 1;
    }
    return found;
}

/* What a client reassembles from the stream. */
typedef struct {
    mhla_buf text[8];
    int32_t ids[8][512];
    int n_ids[8];
    int finishes[8];
    int after_finish[8];
    int done, error, usage;
} seen;

static void parse_stream(const mhla_buf *raw, int n_choices, seen *sn)
{
    const char *p = raw->p ? raw->p : "";
    const char *end = p + raw->len;
    while (p < end) {
        if (sn->done)
            FAIL("bytes after data: [DONE]");
        if ((size_t)(end - p) < 8 || memcmp(p, "data: ", 6) != 0)
            FAIL("an event that does not start with 'data: ': %.40s", p);
        p += 6;
        const char *e = NULL;
        for (const char *q = p; q + 1 < end; q++)
            if (q[0] == '\n' && q[1] == '\n') {
                e = q;
                break;
            }
        if (!e)
            FAIL("an event without its blank line");
        size_t len = (size_t)(e - p);
        if (memchr(p, '\n', len))
            FAIL("a newline inside an event's data");
        if (len == 6 && memcmp(p, "[DONE]", 6) == 0) {
            sn->done = 1;
            p = e + 2;
            continue;
        }
        const char *parse_end = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, len, &parse_end, 0);
        if (!o || parse_end != p + len)
            FAIL("an event's data is not one JSON value: %.*s", (int)(len > 200 ? 200 : len), p);
        cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
        cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
        if (err) {
            if (sn->error || !cJSON_IsString(cJSON_GetObjectItem(err, "message")))
                FAIL("a second or malformed error event");
            sn->error = 1;
        } else if (!cJSON_IsArray(choices)) {
            FAIL("a chunk without choices");
        } else if (cJSON_GetArraySize(choices) == 0) {
            if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "usage")))
                FAIL("an empty chunk that is not the usage chunk");
            sn->usage++;
        } else {
            if (sn->usage)
                FAIL("a chunk after the usage chunk");
            cJSON *ch;
            cJSON_ArrayForEach(ch, choices)
            {
                cJSON *idx = cJSON_GetObjectItem(ch, "index"), *t = cJSON_GetObjectItem(ch, "text");
                cJSON *fr = cJSON_GetObjectItem(ch, "finish_reason");
                if (!cJSON_IsNumber(idx) || idx->valueint < 0 || idx->valueint >= n_choices ||
                    !cJSON_IsString(t) || !fr)
                    FAIL("a malformed choice in a chunk");
                int i = idx->valueint;
                if (sn->finishes[i])
                    sn->after_finish[i] = 1;
                mhla_buf piece[1] = {{0}};
                if (json_texts(p, len, piece, 1) != 1)
                    FAIL("a chunk without exactly one \"text\"");
                mhla_buf_put(&sn->text[i], piece[0].p ? piece[0].p : "", piece[0].len);
                mhla_buf_free(&piece[0]);
                cJSON *ids = cJSON_GetObjectItem(ch, "token_ids"), *id;
                cJSON_ArrayForEach(id, ids)
                {
                    if (sn->n_ids[i] < 512)
                        sn->ids[i][sn->n_ids[i]] = (int32_t)id->valuedouble;
                    sn->n_ids[i]++;
                }
                if (cJSON_IsString(fr))
                    sn->finishes[i]++;
            }
        }
        cJSON_Delete(o);
        p = e + 2;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, data + size};
    client_left = 0;
    unsigned shape = take(&in), shape2 = take(&in);
    srv_params p;
    memset(&p, 0, sizeof p);
    p.n_prompts = 1 + (int)(shape & 1);
    p.n = 1 + (int)((shape >> 1) & 1) * 2; /* 1 or 3: up to 6 choices */
    p.max_tokens = 512;
    p.stream = 1;
    p.include_usage = (shape >> 2) & 1;
    p.echo = (shape >> 3) & 1;
    p.return_token_ids = (shape >> 4) & 1;
    p.logprobs = (shape >> 5) & 1 ? (int)(shape2 % 4) : -1;
    p.prompts = calloc((size_t)p.n_prompts, sizeof *p.prompts);
    for (int g = 0; g < p.n_prompts; g++) {
        int n = 1 + (int)(take(&in) % 4);
        p.prompts[g].ids = malloc((size_t)n * sizeof(int32_t));
        p.prompts[g].n = n;
        for (int k = 0; k < n; k++)
            p.prompts[g].ids[k] = (int32_t)(take(&in) % VOCAB);
    }
    /* with echo the request decodes its prompts (and, with logprobs, makes
     * room for theirs) as http.c's does */
    p.prompt_logprobs = p.echo && p.logprobs >= 0;
    srv_req *r = NULL;
    srv_error e;
    if (srv_req_create(&p, codec, &r, &e))
        FAIL("srv_req_create: %s", e.message);
    /* the writer holds its own reference, as http.c's does */
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
    srv_sse *sse = NULL;
    if (srv_sse_create(r, "demo", codec, gone, NULL, &sse))
        FAIL("srv_sse_create failed");
    mhla_buf raw = {0};
    int ended = 0, news = r->echo != NULL; /* whether a read finds something to send */
    char buf[4096];
    while (in.p < in.end && !r->done) {
        unsigned op = take(&in);
        int ci = (int)(take(&in) % (unsigned)r->n_choices);
        srv_choice *c = &r->choices[ci];
        switch (op % 5) {
        case 0: /* text */
        case 1: {
            size_t want = take(&in) % 24;
            size_t avail = (size_t)(in.end - in.p);
            size_t len = fuzz_utf8_valid_prefix(in.p, want < avail ? want : avail);
            in.p += want < avail ? want : avail;
            if (c->state == SRV_CH_DONE)
                break;
            c->state = SRV_CH_DECODE;
            long off = srv_utf8_chars(c->text.p ? c->text.p : "", c->text.len);
            mhla_buf_put(&c->text, in.p - (want < avail ? want : avail), len);
            if (op & 8)
                add_token(c, r->p.logprobs > 0 ? r->p.logprobs : 0, (int32_t)(take(&in) % VOCAB),
                          -0.5f, off);
            /* shape2 0xA5: read anyway, and the client waits (a quarter second of the
             * writer's wait, then a cut): rare, so that the other inputs run fast */
            news |= len > 0 || (shape2 == 0xA5 && (op & 16));
            break;
        }
        case 2: /* a choice finishes */
            if (c->state != SRV_CH_DONE) {
                c->state = SRV_CH_DONE;
                c->finish_reason = (op & 8) ? "stop" : "length";
                if (++r->n_done == r->n_choices)
                    r->done = 1;
                news = 1;
            }
            break;
        case 3: /* the engine fails the request */
            if ((op & 0x70) == 0x70) {
                r->failed = 1;
                snprintf(r->err, sizeof r->err, "engine step failed \"%c\" \\", (char)take(&in));
                r->done = 1;
                news = 1;
            }
            break;
        case 4: /* the client reads */
            if (news && !ended && !client_left) {
                size_t max = 1 + take(&in) % sizeof buf;
                long n = srv_sse_read(sse, buf, max);
                if (n == 0 || n > (long)max)
                    FAIL("srv_sse_read returned %ld for %zu", n, max);
                if (n < 0)
                    ended = 1;
                else
                    mhla_buf_put(&raw, buf, (size_t)n);
                news = n > 0 && (size_t)n == max; /* maybe more is ready */
            }
            break;
        }
    }
    /* the rest: every choice finishes unless the request failed */
    for (int i = 0; i < r->n_choices && !r->done; i++)
        if (r->choices[i].state != SRV_CH_DONE) {
            r->choices[i].state = SRV_CH_DONE;
            r->choices[i].finish_reason = "length";
            if (++r->n_done == r->n_choices)
                r->done = 1;
        }
    r->completion_tokens = 0;
    for (int i = 0; i < r->n_choices; i++)
        r->completion_tokens += r->choices[i].n_ids;
    while (!ended && !client_left) {
        long n = srv_sse_read(sse, buf, sizeof buf);
        if (n == 0)
            FAIL("srv_sse_read returned 0");
        if (n < 0)
            ended = 1;
        else
            mhla_buf_put(&raw, buf, (size_t)n);
    }
    seen *sn = calloc(1, sizeof *sn);
    parse_stream(&raw, r->n_choices, sn);
    if (client_left) {
        /* cut short: what came is well formed (parse_stream) and the request cancelled */
        if (!atomic_load(&r->cancelled))
            FAIL("the client left but the request was not cancelled");
        for (int i = 0; i < r->n_choices; i++) {
            mhla_buf want = {0};
            if (r->echo)
                mhla_buf_put(&want, r->echo[r->choices[i].group],
                             strlen(r->echo[r->choices[i].group]));
            mhla_buf_put(&want, r->choices[i].text.p ? r->choices[i].text.p : "",
                         r->choices[i].text.len);
            if (sn->text[i].len > want.len ||
                (sn->text[i].len && memcmp(sn->text[i].p, want.p, sn->text[i].len) != 0))
                FAIL("choice %d: the cut stream's text is not a prefix of its text", i);
            mhla_buf_free(&want);
        }
    } else if (!sn->done) {
        FAIL("the stream does not end with data: [DONE]");
    } else if (r->failed) {
        if (!sn->error)
            FAIL("a failed request's stream has no error event");
    } else {
        if (sn->error)
            FAIL("an error event in a request that did not fail");
        if (sn->usage != r->p.include_usage)
            FAIL("%d usage chunks, include_usage %d", sn->usage, r->p.include_usage);
        for (int i = 0; i < r->n_choices; i++) {
            srv_choice *c = &r->choices[i];
            mhla_buf want = {0};
            if (r->echo)
                mhla_buf_put(&want, r->echo[c->group], strlen(r->echo[c->group]));
            mhla_buf_put(&want, c->text.p ? c->text.p : "", c->text.len);
            if (sn->text[i].len != want.len ||
                (want.len && memcmp(sn->text[i].p, want.p, want.len) != 0))
                FAIL("choice %d: the streamed text (%zu bytes) is not its text (%zu bytes)", i,
                     sn->text[i].len, want.len);
            mhla_buf_free(&want);
            if (sn->finishes[i] != 1 || sn->after_finish[i])
                FAIL("choice %d: %d finish reasons (text after one: %d)", i, sn->finishes[i],
                     sn->after_finish[i]);
            if (r->p.return_token_ids &&
                (sn->n_ids[i] != c->n_ids ||
                 (c->n_ids <= 512 && c->n_ids && memcmp(sn->ids[i], c->ids, (size_t)c->n_ids * 4))))
                FAIL("choice %d: streamed token ids differ", i);
        }
        /* the non-streaming body of the same request */
        char *js = srv_completion_json(r, "demo", codec);
        cJSON *o = js ? cJSON_Parse(js) : NULL;
        cJSON *choices = o ? cJSON_GetObjectItem(o, "choices") : NULL;
        if (!cJSON_IsArray(choices) || cJSON_GetArraySize(choices) != r->n_choices)
            FAIL("the non-streaming body is not a completion: %.200s", js ? js : "(null)");
        mhla_buf texts[8] = {{0}};
        if (json_texts(js, strlen(js), texts, 8) != r->n_choices)
            FAIL("the non-streaming body does not hold one text per choice");
        for (int i = 0; i < r->n_choices; i++) {
            if (texts[i].len != sn->text[i].len ||
                (texts[i].len && memcmp(texts[i].p, sn->text[i].p, texts[i].len) != 0))
                FAIL("choice %d: the non-streaming text differs from the streamed one", i);
            mhla_buf_free(&texts[i]);
        }
        cJSON_Delete(o);
        free(js);
    }
    for (int i = 0; i < 8; i++)
        mhla_buf_free(&sn->text[i]);
    free(sn);
    mhla_buf_free(&raw);
    srv_sse_free(sse);
    srv_req_release(r);
    return 0;
}
