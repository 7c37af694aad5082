/*
 * libFuzzer target for the chat-template renderer (template/). The input is a
 * template's text; it is compiled and, when it compiles, rendered twice
 * against a fixed conversation with small limits. Must hold:
 *   - compile and render return 0 or one of the MHLA_TPL_* codes, and a
 *     failure comes with a message and no program or output;
 *   - a success gives a NUL-terminated output within the output cap;
 *   - the two renders agree (same code, same bytes): nothing depends on
 *     state a render leaves behind;
 *   - no crash, leak, hang or sanitizer error (the caps bound every loop,
 *     recursion and allocation).
 */
#include "template.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_template: " __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static const char *CONTEXT =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"a1b2c3d4e\","
    " \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"content\": \"ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\":"
    " {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static cJSON *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("MHLA_TPL_FAKE_TIME", "1764979200", 1);
    ctx = cJSON_Parse(CONTEXT);
    if (!ctx)
        FAIL("the context does not parse");
    return 0;
}

static int known(int rc)
{
    return rc == 0 || rc == MHLA_TPL_ERROR || rc == MHLA_TPL_RAISED || rc == MHLA_TPL_LIMIT ||
           rc == MHLA_TPL_NOMEM;
}

static int render(const mhla_tpl *t, char **out, size_t *len)
{
    mhla_tpl_limits lim = {.max_output = 1 << 16,
                           .max_memory = 16 << 20,
                           .max_iterations = 20000,
                           .max_depth = 16,
                           .max_expr_depth = 64};
    char err[512] = "";
    int rc = mhla_tpl_render(t, ctx, &lim, out, len, err, sizeof err);
    if (!known(rc))
        FAIL("render returned %d", rc);
    if (rc && (*out || (!err[0] && rc != MHLA_TPL_RAISED)))
        FAIL("a failed render (%d) left output or no message", rc);
    if (!rc && (!*out || (*out)[*len] != 0 || *len > lim.max_output))
        FAIL("a render's output is not a string within the cap");
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mhla_tpl *t = NULL;
    char err[512] = "";
    int rc = mhla_tpl_compile((const char *)data, size, &t, err, sizeof err);
    if (!known(rc) || (rc && (t || !err[0])) || (!rc && !t))
        FAIL("compile returned %d with program %p, message '%s'", rc, (void *)t, err);
    if (rc)
        return 0;
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    int ra = render(t, &a, &la), rb = render(t, &b, &lb);
    if (ra != rb || la != lb || (a && memcmp(a, b, la)))
        FAIL("two renders of one program differ (%d, %d)", ra, rb);
    free(a);
    free(b);
    mhla_tpl_free(t);
    return 0;
}
