/*
 * Tool calls in a reply's text (server/tool_parse.c), for the three formats:
 * the content and calls each reply splits into, the same however the text
 * is cut into pieces (whole, byte by byte, at random), text that only looks
 * like a call given back byte for byte, no call ever seen in the content
 * before it closed, and the format each real template's markers show.
 */
#include "check.h"
#include "server_internal.h"

#include <cJSON.h>
#include <string.h>

typedef struct {
    mhla_buf content;
    char *calls; /* the calls, printed unformatted */
    int n_calls, found;
} outcome;

/* text fed in pieces cut by step (0: random sizes), then finished. */
static outcome run(srv_tool_format f, const char *text, int step)
{
    outcome o = {0};
    srv_tool_parser *tp = srv_tool_parser_new(f);
    cJSON *calls = cJSON_CreateArray();
    if (!tp || !calls)
        die("out of memory");
    size_t len = strlen(text);
    for (size_t at = 0; at < len;) {
        size_t n = step ? (size_t)step : (size_t)(1 + rnd(7));
        if (n > len - at)
            n = len - at;
        if (srv_tool_feed(tp, text + at, n, &o.content, calls))
            die("feed: out of memory");
        at += n;
    }
    if (srv_tool_finish(tp, &o.content, calls) || mhla_buf_put(&o.content, "", 0))
        die("finish: out of memory");
    o.n_calls = cJSON_GetArraySize(calls);
    o.found = srv_tool_parser_calls(tp);
    o.calls = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    srv_tool_parser_free(tp);
    return o;
}

static void outcome_free(outcome *o)
{
    mhla_buf_free(&o->content);
    cJSON_free(o->calls);
}

/* text splits into want_content and want_calls (JSON) at every cutting. */
static void splits(srv_tool_format f, const char *text, const char *want_content,
                   const char *want_calls)
{
    for (int step = 0; step <= 3; step++) {
        int cut = step == 3 ? (int)strlen(text) + 1 : step; /* random, 1, 2, whole */
        outcome o = run(f, text, cut);
        CHECK(!strcmp(o.content.p, want_content),
              "%s %s (pieces of %d): content\n  [%s]\n  want [%s]", srv_tool_format_name(f), text,
              cut, o.content.p, want_content);
        CHECK(!strcmp(o.calls, want_calls), "%s %s (pieces of %d): calls\n  %s\n  want %s",
              srv_tool_format_name(f), text, cut, o.calls, want_calls);
        CHECK(o.found == o.n_calls, "%s: the parser counts %d calls, gave %d",
              srv_tool_format_name(f), o.found, o.n_calls);
        outcome_free(&o);
    }
}

/* text is no call: it comes back as content, byte for byte. */
static void plain(srv_tool_format f, const char *text) { splits(f, text, text, "[]"); }

#define CALL(name, args) "{\"name\":\"" name "\",\"arguments\":\"" args "\"}"

static void hermes(void)
{
    srv_tool_format H = SRV_TOOLS_HERMES;
    splits(
        H,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "", "[" CALL("get_weather", "{\\\"city\\\":\\\"Paris\\\"}") "]");
    splits(H,
           "Let me look.\n<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n"
           "<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1,2]}}</tool_call>",
           "Let me look.", "[" CALL("a", "{}") "," CALL("b", "{\\\"x\\\":[1,2]}") "]");
    /* arguments already a string, "parameters", and none at all */
    splits(H, "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"k\\\":1}\"}</tool_call>", "",
           "[" CALL("f", "{\\\"k\\\":1}") "]");
    splits(H, "<tool_call>{\"name\":\"f\",\"parameters\":{\"k\":1}}</tool_call>", "",
           "[" CALL("f", "{\\\"k\\\":1}") "]");
    splits(H, "<tool_call>{\"name\":\"f\"}</tool_call>", "", "[" CALL("f", "{}") "]");
    /* the reply ended inside the call (EOS instead of the closing tag) */
    splits(H, "<tool_call>\n{\"name\":\"f\",\"arguments\":{}}\n", "", "[" CALL("f", "{}") "]");
    /* text after a call is content */
    splits(H, "<tool_call>{\"name\":\"f\"}</tool_call> and done.", " and done.",
           "[" CALL("f", "{}") "]");
    /* not calls: given back as written */
    plain(H, "<tool_call>{not json}</tool_call>");
    plain(H, "text \n <tool_call>{not json}</tool_call> \n");
    splits(H, "a <tool_call>{\"name\":\"f\"}</tool_call> b <tool_call>x</tool_call>",
           "a b <tool_call>x</tool_call>", "[" CALL("f", "{}") "]");
    plain(H, "<tool_call>{\"arguments\":{}}</tool_call>");
    plain(H, "<tool_call>{\"name\":\"f\",\"arguments\":\"not json\"}</tool_call>");
    plain(H, "<tool_call>[1, 2]</tool_call> after");
    plain(H, "<tool_call>{\"name\":\"f\"");
    plain(H, "Plain text, a < sign, <tool and <tool_cal at the end: <tool_ca");
    plain(H, "ends with spaces and a newline  \n");
    plain(H, "");
}

static void llama3(void)
{
    srv_tool_format L = SRV_TOOLS_LLAMA3;
    splits(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
           "[" CALL("get_weather", "{\\\"city\\\":\\\"Paris\\\"}") "]");
    splits(L, "  <|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", "[" CALL("f", "{}") "]");
    splits(L, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"q\": 1}}",
           "", "[" CALL("a", "{}") "," CALL("b", "{\\\"q\\\":1}") "]");
    plain(L, "{\"answer\": 42}");
    plain(L, "{\"name\": \"a\", \"parameters\": {}} and then text");
    plain(L, "Hello {\"name\": \"a\", \"parameters\": {}}");
    plain(L, "<|python_tag|>print(1)");
    plain(L, "  <|pyth");
}

static void mistral(void)
{
    srv_tool_format M = SRV_TOOLS_MISTRAL;
    splits(M, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "",
           "[" CALL("get_weather", "{\\\"city\\\":\\\"Paris\\\"}") "]");
    splits(
        M,
        "Sure. [TOOL_CALLS] [{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":{}}]",
        "Sure.", "[" CALL("a", "{}") "," CALL("b", "{}") "]");
    splits(M, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]b[ARGS]{}", "",
           "[" CALL("get_weather", "{\\\"city\\\":\\\"Paris\\\"}") "," CALL("b", "{}") "]");
    plain(M, "[TOOL_CALLS]not a call");
    plain(M, "before \n[TOOL_CALLS][{\"name\": 1}]");
    plain(M, "[TOOL_CALLS][]");
    plain(M, "[TOOL_CALLS][{\"name\":\"a\",\"arguments\":{}}] trailing");
    plain(M, "text with [TOOL and [TOOL_CALL at its end [TOOL_CA");
}

/* Streaming: no byte of a call reaches the content, and the content before
 * a call is out before the call closes. */
static void streaming(void)
{
    const char *text = "Checking now.<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>";
    srv_tool_parser *tp = srv_tool_parser_new(SRV_TOOLS_HERMES);
    cJSON *calls = cJSON_CreateArray();
    mhla_buf content = {0};
    const char *close = strstr(text, "</tool_call>");
    for (const char *p = text; *p; p++) {
        if (srv_tool_feed(tp, p, 1, &content, calls))
            die("out of memory");
        CHECK(!content.len || !memchr(content.p, '<', content.len), "call bytes in the content");
        if (p + 1 == close)
            CHECK(content.len == strlen("Checking now."), "content held back: %zu bytes out",
                  content.len);
    }
    CHECK(cJSON_GetArraySize(calls) == 1, "the call arrives as it closes, before the reply ends");
    mhla_buf_free(&content);
    cJSON_Delete(calls);
    srv_tool_parser_free(tp);
}

/* The format each template's markers show (argv[1]: the template dir). */
static void detection(const char *dir)
{
    static const struct {
        const char *file;
        srv_tool_format want;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", SRV_TOOLS_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", SRV_TOOLS_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", SRV_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", SRV_TOOLS_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", SRV_TOOLS_MISTRAL},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", SRV_TOOLS_MISTRAL},
        {"chujiezheng-zephyr.jinja", SRV_TOOLS_HERMES},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4096], msg[256], *text = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
        if (mhla_read_file(path, 1 << 20, &text, &len, msg, sizeof msg))
            die("%s", msg);
        srv_tool_format got = srv_tool_format_detect(text);
        CHECK(got == cases[i].want, "%s: detected %s, want %s", cases[i].file,
              srv_tool_format_name(got), srv_tool_format_name(cases[i].want));
        free(text);
    }
    srv_tool_format f;
    CHECK(!srv_tool_format_from_name("mistral", &f) && f == SRV_TOOLS_MISTRAL, "mistral by name");
    CHECK(srv_tool_format_from_name("json", &f) == -1, "an unknown name is refused");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_tool_parse TEMPLATE_DIR");
    hermes();
    llama3();
    mistral();
    streaming();
    detection(argv[1]);
    if (failures)
        return 1;
    printf("server.tool_parse: OK\n");
    return 0;
}
