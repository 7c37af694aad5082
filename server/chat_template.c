/*
 * chat_template.c — which chat template the server's chat requests will be
 * rendered with, chosen once at start: --chat-template FILE, else the model's
 * own (tokenizer_config.json's "chat_template": a string, or a list of named
 * templates of which "default" is the one and "tool_use" the one for
 * requests with tools), else a built-in ChatML template, with a warning. The
 * choice and where it came from are in the start-up log and /v1/models.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEMPLATE_BYTES ((size_t)1 << 20)
#define MAX_CONFIG_BYTES ((size_t)1 << 26)

/* ChatML, as the models that use it render it; with tools, the Hermes
 * convention Qwen 2.5 uses: the tools listed in the system turn, calls as
 * <tool_call>{"name", "arguments"}</tool_call>, results as <tool_response>. */
static const char chatml[] =
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": "
    "<function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and tools and loop.first %}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message['content'] %}{{- '\\n' + message['content'] }}{%- endif %}"
    "{%- for call in message['tool_calls'] %}"
    "{{- '\\n<tool_call>\\n{\\\"name\\\": \\\"' + call['function']['name'] + "
    "'\\\", \\\"arguments\\\": ' + (call['function']['arguments'] | tojson) + "
    "'}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + "
    "'\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

void srv_chat_template_free(srv_chat_template *t)
{
    free(t->text);
    free(t->tool_use);
    memset(t, 0, sizeof *t);
}

static int keep(char **dst, const char *src, const char *what, char *err, size_t errlen)
{
    if (strlen(src) > MAX_TEMPLATE_BYTES) {
        snprintf(err, errlen, "%s is longer than %zu bytes", what, MAX_TEMPLATE_BYTES);
        return -1;
    }
    if (!(*dst = strdup(src))) {
        snprintf(err, errlen, "out of memory for %s", what);
        return -1;
    }
    return 0;
}

/* tokenizer_config.json's chat_template value into t. */
static int from_value(const cJSON *v, srv_chat_template *t, char *err, size_t errlen)
{
    if (cJSON_IsString(v))
        return keep(&t->text, v->valuestring, "chat_template", err, errlen);
    if (!cJSON_IsArray(v)) {
        snprintf(err, errlen,
                 "tokenizer_config.json: 'chat_template' is neither a string nor a "
                 "list of named templates");
        return -1;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(item, "template");
        if (!cJSON_IsString(name) || !cJSON_IsString(tpl)) {
            snprintf(err, errlen,
                     "tokenizer_config.json: a named chat template needs a string "
                     "'name' and 'template'");
            return -1;
        }
        char **dst = !strcmp(name->valuestring, "default")    ? &t->text
                     : !strcmp(name->valuestring, "tool_use") ? &t->tool_use
                                                              : NULL;
        if (dst && !*dst && keep(dst, tpl->valuestring, name->valuestring, err, errlen))
            return -1;
    }
    if (!t->text) {
        snprintf(err, errlen, "tokenizer_config.json: the list of chat templates has no 'default'");
        return -1;
    }
    return 0;
}

/* The model's template, when its tokenizer_config.json has one: 1 found, 0 none, -1 error. */
static int from_model(const char *model_dir, srv_chat_template *t, char *err, size_t errlen)
{
    char path[4096], msg[512], *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
    int rd = mhla_read_file(path, MAX_CONFIG_BYTES, &text, &len, msg, sizeof msg);
    if (rd == MHLA_READ_IO && access(path, F_OK) != 0)
        return 0;
    if (rd) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    int rc = v && !cJSON_IsNull(v) ? (from_value(v, t, err, errlen) ? -1 : 1) : 0;
    if (!root) {
        snprintf(err, errlen, "%s is not valid JSON", path);
        rc = -1;
    }
    cJSON_Delete(root);
    return rc;
}

int srv_chat_template_load(const char *model_dir, const char *file, srv_chat_template *t, char *err,
                           size_t errlen)
{
    memset(t, 0, sizeof *t);
    int rc = 0;
    if (file) {
        char msg[512];
        size_t len;
        if (mhla_read_file(file, MAX_TEMPLATE_BYTES, &t->text, &len, msg, sizeof msg)) {
            snprintf(err, errlen, "--chat-template: %s", msg);
            return -1;
        }
        snprintf(t->source, sizeof t->source, "--chat-template %.200s", file);
    } else if ((rc = from_model(model_dir, t, err, errlen)) < 0) {
        srv_chat_template_free(t);
        return -1;
    } else if (rc == 1) {
        snprintf(t->source, sizeof t->source, "tokenizer_config.json");
    } else if (keep(&t->text, chatml, "the built-in template", err, errlen)) {
        return -1;
    } else {
        t->builtin = 1;
        snprintf(t->source, sizeof t->source, "built-in ChatML (the model has no chat_template)");
    }
    return 0;
}
