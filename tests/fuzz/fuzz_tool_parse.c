/*
 * libFuzzer target for the tool-call parser (server/tool_parse.c). The input
 * is a format and a reply cut into pieces (whole UTF-8 characters, as the
 * stop strings release them). What must hold:
 *   - the pieces give the same content and calls as the reply fed whole;
 *   - a reply in which no call was found comes back as content, byte for byte;
 *   - every call has a name and arguments that parse as JSON;
 *   - the parser's count equals the calls it gave.
 *
 * Layout: byte 0 = format (0 hermes, 1 llama3, 2 mistral, by its low bits);
 * then the pieces, each ended by a 0xFF byte (never in UTF-8).
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
        fprintf(stderr, "fuzz_tool_parse: " __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

typedef struct {
    mhla_buf content;
    char *calls;
    int n_calls, counted;
} result;

/* pieces[i] of lens[i] bytes fed in turn, then finished. */
static int run(srv_tool_format f, const uint8_t **pieces, const size_t *lens, int n, result *out)
{
    memset(out, 0, sizeof *out);
    srv_tool_parser *tp = srv_tool_parser_new(f);
    cJSON *calls = cJSON_CreateArray();
    int rc = !tp || !calls;
    for (int i = 0; i < n && !rc; i++)
        rc = srv_tool_feed(tp, (const char *)pieces[i], lens[i], &out->content, calls);
    rc = rc || srv_tool_finish(tp, &out->content, calls) || mhla_buf_put(&out->content, "", 0);
    if (!rc) {
        out->n_calls = cJSON_GetArraySize(calls);
        out->counted = srv_tool_parser_calls(tp);
        const cJSON *c;
        cJSON_ArrayForEach(c, calls)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
            cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
            if (!cJSON_IsString(name) || !name->valuestring[0] || !parsed)
                FAIL("a call without a name or with arguments that are not JSON");
            cJSON_Delete(parsed);
        }
        out->calls = cJSON_PrintUnformatted(calls);
    }
    cJSON_Delete(calls);
    srv_tool_parser_free(tp);
    return rc || !out->calls;
}

static void result_free(result *r)
{
    mhla_buf_free(&r->content);
    cJSON_free(r->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    static const srv_tool_format formats[] = {SRV_TOOLS_HERMES, SRV_TOOLS_LLAMA3, SRV_TOOLS_MISTRAL,
                                              SRV_TOOLS_HERMES};
    srv_tool_format f = formats[data[0] & 3];
    const uint8_t *pieces[256], *p = data + 1, *end = data + size;
    size_t lens[256];
    int n = 0;
    mhla_buf whole = {0};
    while (p < end && n < 256) {
        const uint8_t *sep = memchr(p, 0xFF, (size_t)(end - p)), *stop = sep ? sep : end;
        pieces[n] = p;
        lens[n] = fuzz_utf8_valid_prefix(p, (size_t)(stop - p));
        if (mhla_buf_put(&whole, p, lens[n]))
            FAIL("out of memory");
        n++;
        p = sep ? sep + 1 : end;
    }
    if (mhla_buf_put(&whole, "", 0))
        FAIL("out of memory");
    const uint8_t *one[1] = {(const uint8_t *)whole.p};
    size_t one_len[1] = {whole.len};
    result a, b;
    if (run(f, pieces, lens, n, &a) || run(f, one, one_len, 1, &b))
        FAIL("out of memory");
    if (a.content.len != b.content.len || memcmp(a.content.p, b.content.p, a.content.len) ||
        strcmp(a.calls, b.calls))
        FAIL("%d pieces and the whole reply differ: %s vs %s", n, a.calls, b.calls);
    if (a.counted != a.n_calls)
        FAIL("the parser counts %d calls but gave %d", a.counted, a.n_calls);
    if (a.n_calls == 0 && (a.content.len != whole.len || memcmp(a.content.p, whole.p, whole.len)))
        FAIL("a reply without calls did not come back byte for byte");
    result_free(&a);
    result_free(&b);
    mhla_buf_free(&whole);
    return 0;
}
