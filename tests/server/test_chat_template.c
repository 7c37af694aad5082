/*
 * Which chat template the server takes (server/chat_template.c): the model's
 * tokenizer_config.json chat_template as a string or as a list of named
 * templates ("default", "tool_use"), --chat-template FILE over it, the
 * built-in ChatML one when there is none; and a broken source refused with a
 * message naming it.
 *
 * usage: test_chat_template WORK_DIR
 */
#include "check.h"
#include "server_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static char work[1024];

/* A model folder holding tokenizer_config.json with body (NULL: no file). */
static const char *model_with(const char *name, const char *body)
{
    static char dir[2048];
    char path[2200];
    snprintf(dir, sizeof dir, "%s/%s", work, name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    remove(path);
    if (body) {
        FILE *f = fopen(path, "w");
        if (!f || fputs(body, f) < 0 || fclose(f))
            die("cannot write %s", path);
    }
    return dir;
}

static void takes(const char *what, const char *dir, const char *file, const char *text,
                  const char *tool_use, const char *source)
{
    srv_chat_template t;
    char err[512] = "";
    int rc = srv_chat_template_load(dir, file, &t, err, sizeof err);
    CHECK(rc == 0, "%s: refused: %s", what, err);
    if (rc)
        return;
    CHECK(strstr(t.text, text) != NULL, "%s: template '%s' lacks '%s'", what, t.text, text);
    CHECK(tool_use ? t.tool_use && !strcmp(t.tool_use, tool_use) : !t.tool_use,
          "%s: tool_use template '%s'", what, t.tool_use ? t.tool_use : "(none)");
    CHECK(strstr(t.source, source) != NULL, "%s: source '%s', want '%s'", what, t.source, source);
    CHECK(t.builtin == !strcmp(source, "built-in"), "%s: builtin %d", what, t.builtin);
    srv_chat_template_free(&t);
}

static void refuses(const char *what, const char *dir, const char *file, const char *words)
{
    srv_chat_template t;
    char err[512] = "";
    CHECK(srv_chat_template_load(dir, file, &t, err, sizeof err) == -1 && strstr(err, words),
          "%s: want a refusal with '%s', got '%s'", what, words, err);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_chat_template WORK_DIR");
    snprintf(work, sizeof work, "%s", argv[1]);
    takes("no tokenizer_config.json", model_with("none", NULL), NULL, "<|im_start|>", NULL,
          "built-in");
    takes("no chat_template in it", model_with("plain", "{\"bos_token\": \"<s>\"}"), NULL,
          "<|im_start|>", NULL, "built-in");
    takes("a string", model_with("string", "{\"chat_template\": \"{{ messages[0].content }}\"}"),
          NULL, "{{ messages[0].content }}", NULL, "tokenizer_config.json");
    takes("named templates",
          model_with("named", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": "
                              "\"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}"),
          NULL, "D", "T", "tokenizer_config.json");
    char file[2048];
    snprintf(file, sizeof file, "%s/override.jinja", work);
    FILE *f = fopen(file, "w");
    if (!f || fputs("{{ 'over' }}", f) < 0 || fclose(f))
        die("cannot write %s", file);
    takes("--chat-template over the model's", model_with("string", NULL), file, "over", NULL,
          "--chat-template");
    refuses("a missing --chat-template", model_with("none", NULL), "/no/such/file.jinja",
            "/no/such/file.jinja");
    refuses("named templates without default",
            model_with("nodefault", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": "
                                    "\"T\"}]}"),
            NULL, "no 'default'");
    refuses("a number", model_with("number", "{\"chat_template\": 5}"), NULL, "neither a string");
    refuses("broken JSON", model_with("broken", "{\"chat_template\": "), NULL, "not valid JSON");
    if (failures)
        return 1;
    printf("server.chat_template: OK\n");
    return 0;
}
