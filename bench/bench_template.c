/*
 * bench_template — the chat template's render time per request: each
 * template is compiled once, then rendered many times against a 20-message
 * conversation with tools (system, users, assistants with tool calls, tool
 * results; 4 tools with JSON-schema parameters), in the context the server
 * builds (server/chat_render.c: messages in the shape
 * srv_chat_messages_parse makes, tools, add_generation_prompt, bos_token,
 * eos_token). Prints per template the compile time, the prompt's length and
 * the median and 99th percentile of the render time in µs.
 *
 * usage: bench_template [--iters N] [--check] TEMPLATE.jinja...
 *
 * --check also requires of each template that every render is non-empty and
 * byte-identical to the first, and that the prompt names every tool and
 * holds the last user message (the conversation and tools reached it).
 */
#include "bench_util.h"
#include "template.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEMPLATE_BYTES ((size_t)1 << 20)

/* Tool-call ids of 9 alphanumerics (Mistral's templates refuse others); one
 * call per assistant message (Llama 3.1's template refuses more). */
static const char conversation[] =
    "["
    "{\"role\":\"system\",\"content\":\"You are a travel assistant. Use the tools when a question "
    "needs live data; answer in one or two sentences.\"},"
    "{\"role\":\"user\",\"content\":\"What's the weather in Paris right now?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call00001\","
    "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":"
    "\"Paris\",\"unit\":\"celsius\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call00001\",\"name\":\"get_weather\",\"content\":"
    "\"{\\\"temperature\\\": 18, \\\"sky\\\": \\\"cloudy\\\"}\"},"
    "{\"role\":\"assistant\",\"content\":\"It is 18 °C and cloudy in Paris.\"},"
    "{\"role\":\"user\",\"content\":\"Find me a train from Paris to Lyon tomorrow morning.\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call00002\","
    "\"type\":\"function\",\"function\":{\"name\":\"search_trains\",\"arguments\":{\"from\":"
    "\"Paris\",\"to\":\"Lyon\",\"date\":\"2025-06-02\",\"earliest\":\"07:00\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call00002\",\"name\":\"search_trains\",\"content\":"
    "\"[{\\\"train\\\": \\\"TGV 6603\\\", \\\"departs\\\": \\\"07:56\\\", \\\"arrives\\\": "
    "\\\"09:52\\\", \\\"price_eur\\\": 49}]\"},"
    "{\"role\":\"assistant\",\"content\":\"TGV 6603 leaves Paris at 07:56 and reaches Lyon at "
    "09:52, for 49 €.\"},"
    "{\"role\":\"user\",\"content\":\"Book it for two adults, please.\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call00003\","
    "\"type\":\"function\",\"function\":{\"name\":\"book_ticket\",\"arguments\":{\"train\":"
    "\"TGV 6603\",\"passengers\":[{\"type\":\"adult\"},{\"type\":\"adult\"}],\"class\":"
    "\"second\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call00003\",\"name\":\"book_ticket\",\"content\":"
    "\"{\\\"booking\\\": \\\"QX7-PL2\\\", \\\"total_eur\\\": 98}\"},"
    "{\"role\":\"assistant\",\"content\":\"Booked: reference QX7-PL2, 98 € in all.\"},"
    "{\"role\":\"user\",\"content\":\"How much is that in US dollars?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call00004\","
    "\"type\":\"function\",\"function\":{\"name\":\"convert_currency\",\"arguments\":{"
    "\"amount\":98,\"from\":\"EUR\",\"to\":\"USD\"}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call00004\",\"name\":\"convert_currency\","
    "\"content\":\"{\\\"amount\\\": 106.33, \\\"currency\\\": \\\"USD\\\"}\"},"
    "{\"role\":\"assistant\",\"content\":\"98 € is about 106.33 US dollars.\"},"
    "{\"role\":\"user\",\"content\":\"Is the station far from the old town?\"},"
    "{\"role\":\"assistant\",\"content\":\"Lyon Part-Dieu is about 2 km from Vieux Lyon, ten "
    "minutes by metro.\"},"
    "{\"role\":\"user\",\"content\":\"Great. Will it rain in Lyon tomorrow afternoon?\"}"
    "]";

static const char tools[] =
    "["
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The "
    "current weather in a city.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"city\":{\"type\":\"string\",\"description\":\"The city's name\"},\"unit\":{\"type\":"
    "\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search_trains\",\"description\":\"Trains "
    "between two stations on a date.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"},\"date\":{\"type\":\"string\","
    "\"description\":\"YYYY-MM-DD\"},\"earliest\":{\"type\":\"string\",\"description\":"
    "\"HH:MM, local time\"}},\"required\":[\"from\",\"to\",\"date\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"book_ticket\",\"description\":\"Books "
    "seats on a train.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"train\":{"
    "\"type\":\"string\"},\"passengers\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"type\":{\"type\":\"string\",\"enum\":[\"adult\",\"child\"]}}}},"
    "\"class\":{\"type\":\"string\",\"enum\":[\"first\",\"second\"]}},\"required\":[\"train\","
    "\"passengers\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"convert_currency\",\"description\":"
    "\"Converts an amount between currencies at today's rate.\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"amount\":{\"type\":\"number\"},\"from\":{\"type\":\"string\","
    "\"description\":\"ISO 4217 code\"},\"to\":{\"type\":\"string\",\"description\":\"ISO 4217 "
    "code\"}},\"required\":[\"amount\",\"from\",\"to\"]}}}"
    "]";

static const char *const tool_names[] = {"get_weather", "search_trains", "book_ticket",
                                         "convert_currency"};
static const char last_user[] = "Will it rain in Lyon tomorrow afternoon?";

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_template: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* The context chat_render.c's context() makes, with Llama 3's specials (the
 * templates that do not print them ignore them). */
static cJSON *make_context(void)
{
    cJSON *ctx = cJSON_CreateObject();
    cJSON *m = cJSON_Parse(conversation), *t = cJSON_Parse(tools);
    if (!ctx || !m || !t)
        fail("the benchmark's conversation does not parse (or out of memory)");
    cJSON_AddItemToObject(ctx, "messages", m);
    cJSON_AddItemToObject(ctx, "tools", t);
    if (!cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1) ||
        !cJSON_AddStringToObject(ctx, "bos_token", "<|begin_of_text|>") ||
        !cJSON_AddStringToObject(ctx, "eos_token", "<|eot_id|>"))
        fail("out of memory");
    return ctx;
}

static mhla_tpl *compile(const char *path, double *ms)
{
    char *src, err[512];
    size_t len;
    if (mhla_read_file(path, MAX_TEMPLATE_BYTES, &src, &len, err, sizeof err))
        fail("%s: %s", path, err);
    mhla_tpl *tpl;
    double t0 = mhla_now();
    int rc = mhla_tpl_compile(src, len, &tpl, err, sizeof err);
    *ms = (mhla_now() - t0) * 1e3;
    free(src);
    if (rc)
        fail("%s does not compile: %s", path, err);
    return tpl;
}

/* What --check requires of the first render. */
static void check_prompt(const char *path, const char *text)
{
    for (size_t i = 0; i < sizeof tool_names / sizeof *tool_names; i++)
        if (!strstr(text, tool_names[i]))
            fail("%s: the prompt does not name the tool %s", path, tool_names[i]);
    if (!strstr(text, last_user))
        fail("%s: the prompt lacks the last user message ('%s')", path, last_user);
}

/* iters renders of tpl; us[i] is render i's time. The first render's text is
 * kept in *first (and compared with every other under --check). */
static void render_many(const char *path, const mhla_tpl *tpl, const cJSON *ctx, int iters,
                        int check, double *us, char **first, size_t *first_len)
{
    char err[512];
    for (int i = 0; i < iters; i++) {
        char *out;
        size_t len;
        double t0 = mhla_now();
        int rc = mhla_tpl_render(tpl, ctx, NULL, &out, &len, err, sizeof err);
        us[i] = (mhla_now() - t0) * 1e6;
        if (rc)
            fail("%s does not render: %s", path, err);
        if (i == 0) {
            *first = out;
            *first_len = len;
            continue;
        }
        if (check && (len != *first_len || memcmp(out, *first, len)))
            fail("%s: render %d differs from the first", path, i + 1);
        free(out);
    }
    if (check && *first_len == 0)
        fail("%s: the prompt is empty", path);
    if (check)
        check_prompt(path, *first);
}

static double percentile(const double *sorted, int n, double q)
{
    int i = (int)(q * (n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

static void bench_one(const char *path, const cJSON *ctx, int iters, int check)
{
    double compile_ms;
    mhla_tpl *tpl = compile(path, &compile_ms);
    double *us = malloc((size_t)iters * sizeof *us);
    if (!us)
        fail("out of memory");
    char *first = NULL;
    size_t len = 0;
    render_many(path, tpl, ctx, iters, check, us, &first, &len);
    qsort(us, (size_t)iters, sizeof *us, bench_cmp_double);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("| %s | %.2f | %zu | %d | %.1f | %.1f |\n", name, compile_ms, len, iters,
           percentile(us, iters, 0.5), percentile(us, iters, 0.99));
    free(first);
    free(us);
    mhla_tpl_free(tpl);
}

int main(int argc, char **argv)
{
    int iters = 2000, check = 0, a = 1;
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strcmp(argv[a], "--check")) {
            check = 1;
        } else if (!strcmp(argv[a], "--iters") && a + 1 < argc) {
            char *end;
            long v = strtol(argv[++a], &end, 10);
            if (*end || v < 1 || v > 10000000)
                fail("--iters takes an integer from 1 to 10000000, not '%s'", argv[a]);
            iters = (int)v;
        } else {
            fail("unknown option '%s'", argv[a]);
        }
    }
    if (a == argc)
        fail("usage: bench_template [--iters N] [--check] TEMPLATE.jinja...");
    cJSON *ctx = make_context();
    printf("20 messages (4 tool calls and results), 4 tools; %d renders per template\n\n", iters);
    printf("| template | compile ms | prompt bytes | renders | median µs | p99 µs |\n");
    printf("|---|---|---|---|---|---|\n");
    for (; a < argc; a++)
        bench_one(argv[a], ctx, iters, check);
    cJSON_Delete(ctx);
    return 0;
}
