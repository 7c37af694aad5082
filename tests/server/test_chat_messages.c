/*
 * A chat body's messages as a template reads them (server/chat_messages.c):
 * roles, string and text-part content (joined with "\n"), names, assistant
 * tool calls with their arguments parsed into objects, tool messages; and
 * every malformed message refused with a 400 whose param points at the field.
 */
#include "check.h"
#include "server_internal.h"

#include <cJSON.h>
#include <string.h>

/* The rewritten messages of body, printed unformatted; NULL when refused (e filled). */
static char *parse(const char *body, srv_error *e)
{
    cJSON *root = cJSON_Parse(body), *out = NULL;
    if (!root)
        die("test body is not JSON: %s", body);
    char *s = NULL;
    if (srv_chat_messages_parse(root, &out, e) == 0) {
        s = cJSON_PrintUnformatted(out);
        cJSON_Delete(out);
    }
    cJSON_Delete(root);
    return s;
}

static void accepts(const char *body, const char *want)
{
    srv_error e = {0};
    char *got = parse(body, &e);
    CHECK(got && !strcmp(got, want), "%s\n  gave %s\n  want %s (%s)", body, got ? got : "(refused)",
          want, e.message);
    cJSON_free(got);
}

static void refuses(const char *body, const char *param, const char *words)
{
    srv_error e = {0};
    char *got = parse(body, &e);
    CHECK(!got && e.code == SRV_ERR_INVALID && !strcmp(e.param, param) && strstr(e.message, words),
          "%s\n  gave %s, param '%s', message '%s'; want param '%s' with '%s'", body,
          got ? got : "(refused)", e.param, e.message, param, words);
    cJSON_free(got);
}

int main(void)
{
    accepts("{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
            "{\"role\":\"user\",\"content\":\"hi\",\"name\":\"ann\"}]}",
            "[{\"role\":\"system\",\"content\":\"be brief\"},"
            "{\"role\":\"user\",\"content\":\"hi\",\"name\":\"ann\"}]");
    accepts(
        "{\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]}]}",
        "[{\"role\":\"developer\",\"content\":\"a\\nb\"}]");
    accepts(
        "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
        "\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"x\\\": "
        "[1, \\\"é\\\"]}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]}",
        "[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\","
        "\"id\":\"c1\",\"function\":{\"name\":\"get\",\"arguments\":{\"x\":[1,\"é\"]}}}]},"
        "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c1\"}]");
    accepts("{\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
            "[{\"role\":\"user\",\"content\":\"\"}]");

    refuses("{\"prompt\":\"x\"}", "messages", "non-empty array");
    refuses("{\"messages\":[]}", "messages", "non-empty array");
    refuses("{\"messages\":[5]}", "messages[0]", "role");
    refuses("{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "messages[0].role",
            "unknown role 'robot'");
    refuses("{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content", "needs its 'content'");
    refuses("{\"messages\":[{\"role\":\"user\",\"content\":7}]}", "messages[0].content",
            "string or an array");
    refuses("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":"
            "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image_url\",\"image_url\":{}}]}]}",
            "messages[1].content[1].type", "'image_url' are not supported");
    refuses("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
            "messages[0].content[0].text", "string 'text'");
    refuses("{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
            "{\"name\":\"f\",\"arguments\":\"{not json\"}}]}]}",
            "messages[0].tool_calls[0].function.arguments", "JSON");
    refuses("{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
            "{\"arguments\":\"{}\"}}]}]}",
            "messages[0].tool_calls[0].function", "'name'");
    refuses("{\"messages\":[{\"role\":\"tool\",\"content\":\"42\"}]}", "messages[0].tool_call_id",
            "needs its 'tool_call_id'");
    refuses("{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":3}]}", "messages[0].name",
            "must be a string");
    if (failures)
        return 1;
    printf("server.chat_messages: OK\n");
    return 0;
}
