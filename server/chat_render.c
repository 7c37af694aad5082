/*
 * chat_render.c — a chat request's messages into its prompt text: the
 * server's chat template (chat_template.c chose it) compiled once at start,
 * rendered per request with the messages, add_generation_prompt, the
 * model's bos_token and eos_token, the request's tools and
 * chat_template_kwargs, as transformers' apply_chat_template renders it. A
 * request with tools gets the model's "tool_use" template where it has one.
 */
#include "server_internal.h"
/* by its path: the fuzz targets compile server/ with no template include
 * directory (this file is linked only where server.c is) */
#include "../template/include/template.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES ((size_t)1 << 26)

/* tokenizer_config.json's name: a string, or an object with "content". */
static int special_text(const cJSON *root, const char *name, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    *out = strdup(cJSON_IsString(v) ? v->valuestring : "");
    return *out ? 0 : -1;
}

/* bos and eos from model_dir/tokenizer_config.json; "" without one (or
 * with one that cannot be read: chat_template.c reports that). Running out
 * of memory is an error: it must not turn into empty special tokens. */
static int load_specials(srv_chat_render *cr, const char *model_dir, char *err, size_t errlen)
{
    char path[4096], msg[256], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir ? model_dir : ".");
    cJSON *root = NULL;
    int rd = mhla_read_file(path, MAX_CONFIG_BYTES, &text, &len, msg, sizeof msg), oom = 0;
    if (rd == 0)
        root = srv_json_parse(text, len, NULL, &oom);
    free(text);
    int rc = rd == MHLA_READ_NOMEM || oom || special_text(root, "bos_token", &cr->bos) ||
             special_text(root, "eos_token", &cr->eos);
    cJSON_Delete(root);
    if (rc)
        snprintf(err, errlen, "out of memory for the chat template's special tokens");
    return rc ? -1 : 0;
}

static int render_text(const srv_chat_render *cr, cJSON *messages, const cJSON *tools,
                       const cJSON *kwargs, char **text, size_t *len, srv_error *e);

static int compile(const char *text, const char *what, const srv_chat_template *t,
                   struct mhla_tpl **out, char *err, size_t errlen)
{
    char msg[512];
    if (mhla_tpl_compile(text, strlen(text), out, msg, sizeof msg) == 0)
        return 0;
    snprintf(err, errlen, "the chat template%s (%s) does not compile: %s", what, t->source, msg);
    return -1;
}

int srv_chat_render_init(srv_chat_render *cr, const srv_chat_template *t, const char *model_dir,
                         int tool_format, char *err, size_t errlen)
{
    memset(cr, 0, sizeof *cr);
    if (compile(t->text, "", t, &cr->tpl, err, errlen) ||
        (t->tool_use && compile(t->tool_use, " 'tool_use'", t, &cr->tpl_tools, err, errlen))) {
        srv_chat_render_free(cr);
        return -1;
    }
    /* the calls are written as the template that shows tools teaches */
    cr->tool_format = tool_format >= 0
                          ? (srv_tool_format)tool_format
                          : srv_tool_format_detect(t->tool_use ? t->tool_use : t->text);
    if (load_specials(cr, model_dir, err, errlen)) {
        srv_chat_render_free(cr);
        return -1;
    }
    cr->render = render_text;
    return 0;
}

void srv_chat_render_free(srv_chat_render *cr)
{
    mhla_tpl_free(cr->tpl);
    mhla_tpl_free(cr->tpl_tools);
    free(cr->bos);
    free(cr->eos);
    memset(cr, 0, sizeof *cr);
}

/* cJSON_AddItemToObject, item deleted when it was not added (the key's copy
 * failed, or item is NULL from a failed copy itself). */
static int add_owned(cJSON *obj, const char *key, cJSON *item)
{
    if (item && cJSON_AddItemToObject(obj, key, item))
        return 1;
    cJSON_Delete(item);
    return 0;
}

/* The template's variables: kwargs' keys, then the server's (which win,
 * save add_generation_prompt, which a client may turn off). NULL when out
 * of memory; messages is consumed either way. */
static cJSON *context(const srv_chat_render *cr, cJSON *messages, const cJSON *tools,
                      const cJSON *kwargs)
{
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx || !cJSON_AddItemToObject(ctx, "messages", messages)) {
        cJSON_Delete(ctx);
        cJSON_Delete(messages);
        return NULL;
    }
    int ok = !tools || add_owned(ctx, "tools", cJSON_Duplicate(tools, 1));
    const cJSON *kw;
    cJSON_ArrayForEach(kw, kwargs)
    {
        if (strcmp(kw->string, "messages") && strcmp(kw->string, "bos_token") &&
            strcmp(kw->string, "eos_token") && !cJSON_GetObjectItemCaseSensitive(ctx, kw->string))
            ok &= add_owned(ctx, kw->string, cJSON_Duplicate(kw, 1));
    }
    if (!cJSON_GetObjectItemCaseSensitive(ctx, "add_generation_prompt"))
        ok &= cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1) != NULL;
    ok &= cJSON_AddStringToObject(ctx, "bos_token", cr->bos) != NULL;
    ok &= cJSON_AddStringToObject(ctx, "eos_token", cr->eos) != NULL;
    if (!ok) {
        cJSON_Delete(ctx);
        return NULL;
    }
    return ctx;
}

static int render_text(const srv_chat_render *cr, cJSON *messages, const cJSON *tools,
                       const cJSON *kwargs, char **text, size_t *len, srv_error *e)
{
    *text = NULL;
    cJSON *ctx = context(cr, messages, tools, kwargs);
    if (!ctx) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory");
        return -1;
    }
    char msg[400];
    struct mhla_tpl *tpl = cr->tpl_tools && tools ? cr->tpl_tools : cr->tpl;
    int rc = mhla_tpl_render(tpl, ctx, NULL, text, len, msg, sizeof msg);
    cJSON_Delete(ctx);
    if (rc == MHLA_TPL_NOMEM)
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory rendering the chat template");
    else if (rc == MHLA_TPL_RAISED)
        srv_error_set(e, SRV_ERR_INVALID, "messages", "%s", msg);
    else if (rc)
        srv_error_set(e, SRV_ERR_INVALID, "messages", "the chat template failed: %s", msg);
    return rc ? -1 : 0;
}

/* The render's kwargs of an /apply-template body: its chat_template_kwargs
 * and add_generation_prompt (default true). NULL with e set. */
static cJSON *apply_kwargs(const cJSON *root, srv_error *e)
{
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    const char *bad = kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw)    ? "chat_template_kwargs"
                      : agp && !cJSON_IsNull(agp) && !cJSON_IsBool(agp) ? "add_generation_prompt"
                                                                        : NULL;
    if (bad) {
        srv_error_set(e, SRV_ERR_INVALID, bad, "'%s' must be %s", bad,
                      bad[0] == 'c' ? "an object" : "a boolean");
        return NULL;
    }
    cJSON *out = cJSON_IsObject(kw) ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
    int ok = out != NULL;
    if (ok && cJSON_IsBool(agp)) {
        cJSON_DeleteItemFromObjectCaseSensitive(out, "add_generation_prompt");
        ok = cJSON_AddBoolToObject(out, "add_generation_prompt", cJSON_IsTrue(agp)) != NULL;
    }
    if (!ok) {
        cJSON_Delete(out);
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory");
        return NULL;
    }
    return out;
}

int srv_chat_apply_template(const srv_chat_render *cr, const cJSON *root, char **text, size_t *len,
                            srv_error *e)
{
    *text = NULL;
    srv_params p; /* its tools are checked as a chat request's */
    const cJSON *tools = NULL;
    memset(&p, 0, sizeof p);
    cJSON *messages = NULL, *kwargs = apply_kwargs(root, e);
    if (!kwargs)
        return -1;
    int rc = srv_chat_tools_parse(root, cr, NULL, &p, &tools, e) ||
                     srv_chat_messages_parse(root, &messages, e) ||
                     cr->render(cr, messages, tools, kwargs, text, len, e)
                 ? -1
                 : 0;
    cJSON_Delete(kwargs);
    return rc;
}
