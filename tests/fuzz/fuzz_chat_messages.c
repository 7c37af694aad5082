/*
 * libFuzzer target for a chat body's messages (srv_chat_messages_parse): any
 * body either gives messages a chat template can read — every one an object
 * with a known role, a string or null content, string names and tool call
 * ids, tool calls whose function has a name — or one 400 whose param names a
 * field under "messages"; never a crash, overflow or leak.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_chat_messages: " __VA_ARGS__);                                       \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static int known_role(const char *r)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(r, roles[i]))
            return 1;
    return 0;
}

static void check_message(const cJSON *m)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role) || !known_role(role->valuestring))
        FAIL("a message without a known role came out");
    if (!cJSON_IsString(content) && !cJSON_IsNull(content))
        FAIL("content is neither a string nor null");
    if (cJSON_IsNull(content) && strcmp(role->valuestring, "assistant"))
        FAIL("a %s message came out without content", role->valuestring);
    const cJSON *tc, *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    cJSON_ArrayForEach(tc, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
            FAIL("a tool call without a function name came out");
    }
    if (!strcmp(role->valuestring, "tool") &&
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "tool_call_id")))
        FAIL("a tool message without tool_call_id came out");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    srv_error e = {0};
    cJSON *root = srv_json_parse_body((const char *)data, size, &e), *out = NULL;
    if (!root)
        return 0;
    if (srv_chat_messages_parse(root, &out, &e) == 0) {
        const cJSON *m;
        if (!cJSON_IsArray(out) || cJSON_GetArraySize(out) == 0)
            FAIL("accepted messages are not a non-empty array");
        cJSON_ArrayForEach(m, out) check_message(m);
        cJSON_Delete(out);
    } else if (out) {
        FAIL("a refusal left its output");
    } else if (e.code == SRV_ERR_INVALID && strncmp(e.param, "messages", 8)) {
        FAIL("a refusal names param '%s', not a field of messages", e.param);
    } else if (e.code != SRV_ERR_INVALID && e.code != SRV_ERR_INTERNAL) {
        FAIL("a refusal with code %d", (int)e.code);
    }
    cJSON_Delete(root);
    return 0;
}
