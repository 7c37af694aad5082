/* config.json → mhla_config, with the defaults and refusals of docs/model.md, config.json. */
#include "engine_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

/* Reads an optional integer field; null or absent keeps *out. */
static int get_int(const cJSON *root, const char *key, long lo, long hi, int *out, mhla_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble))
        return eng_fail(err, "config.json: field '%s' must be an integer", key);
    if (it->valuedouble < (double)lo || it->valuedouble > (double)hi)
        return eng_fail(err, "config.json: field '%s' = %.0f is out of range [%ld, %ld]", key,
                        it->valuedouble, lo, hi);
    *out = (int)it->valuedouble;
    return 0;
}

static int get_num(const cJSON *root, const char *key, double lo, double hi, double *out,
                   mhla_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsNumber(it))
        return eng_fail(err, "config.json: field '%s' must be a number", key);
    if (!(it->valuedouble >= lo && it->valuedouble <= hi))
        return eng_fail(err, "config.json: field '%s' = %g is out of range [%g, %g]", key,
                        it->valuedouble, lo, hi);
    *out = it->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, int *out, mhla_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsBool(it))
        return eng_fail(err, "config.json: field '%s' must be true or false", key);
    *out = cJSON_IsTrue(it);
    return 0;
}

/* Returns the string value of an optional field, NULL when absent or null. */
static int get_str(const cJSON *root, const char *key, const char **out, mhla_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = NULL;
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsString(it))
        return eng_fail(err, "config.json: field '%s' must be a string", key);
    *out = it->valuestring;
    return 0;
}

/* eos_token_id may be a list (generation configs often are); the first is used. */
static int get_token_id(const cJSON *root, const char *key, int *out, mhla_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (it && cJSON_IsArray(it)) {
        if (cJSON_GetArraySize(it) == 0)
            return 0;
        it = cJSON_GetArrayItem(it, 0);
        if (!cJSON_IsNumber(it))
            return eng_fail(err, "config.json: field '%s' must hold integers", key);
        *out = (int)it->valuedouble;
        return 0;
    }
    return get_int(root, key, -1, 1L << 30, out, err);
}

/* What this engine runs at all: a GLA model with MHLA attention, no short
 * convolution, no softmax-attention layers. */
static int check_kind(const cJSON *root, mhla_error *err)
{
    const char *s;
    if (get_str(root, "model_type", &s, err))
        return -1;
    if (s && strcmp(s, "gla") != 0)
        return eng_fail(err, "config.json: model_type '%s' is not supported (expected 'gla')", s);
    if (get_str(root, "attn_extends", &s, err))
        return -1;
    if (s && strcmp(s, "mhla") != 0)
        return eng_fail(err, "config.json: attn_extends '%s' is not supported (expected 'mhla')",
                        s);

    int short_conv = 0;
    if (get_bool(root, "use_short_conv", &short_conv, err))
        return -1;
    if (short_conv)
        return eng_fail(err, "config.json: use_short_conv = true is not supported yet");
    const cJSON *attn = cJSON_GetObjectItemCaseSensitive(root, "attn");
    if (attn && !cJSON_IsNull(attn))
        return eng_fail(err, "config.json: hybrid softmax-attention layers ('attn') are not "
                             "supported yet");
    return 0;
}

/* The shape fields as config.json gives them, with their defaults. */
typedef struct {
    int V, D, L, H, Hkv, I, C;
    double expand_k, expand_v, hidden_ratio, eps;
} shape_fields;

static int read_shape(const cJSON *root, shape_fields *f, mhla_error *err)
{
    *f = (shape_fields){.V = 32000,
                        .D = 2048,
                        .L = 24,
                        .H = 4,
                        .Hkv = -1,
                        .I = -1,
                        .C = 64,
                        .expand_k = 0.5,
                        .expand_v = 1.0,
                        .hidden_ratio = 4.0,
                        .eps = 1e-6};
    if (get_int(root, "vocab_size", 1, 1L << 24, &f->V, err) ||
        get_int(root, "hidden_size", 1, 1L << 16, &f->D, err) ||
        get_int(root, "num_hidden_layers", 1, 4096, &f->L, err) ||
        get_int(root, "num_heads", 1, 4096, &f->H, err) ||
        get_int(root, "num_kv_heads", 1, 4096, &f->Hkv, err) ||
        get_int(root, "intermediate_size", 1, 1L << 20, &f->I, err) ||
        get_int(root, "mhla_chunk_size", 1, 1L << 16, &f->C, err) ||
        get_num(root, "expand_k", 1e-6, 64, &f->expand_k, err) ||
        get_num(root, "expand_v", 1e-6, 64, &f->expand_v, err) ||
        get_num(root, "hidden_ratio", 1e-6, 1024, &f->hidden_ratio, err) ||
        get_num(root, "norm_eps", 0, 1, &f->eps, err))
        return -1;
    if (f->Hkv < 0)
        f->Hkv = f->H;
    return 0;
}

static int read_flags(const cJSON *root, mhla_config *cfg, mhla_error *err)
{
    cfg->use_output_gate = 1;
    cfg->tie_word_embeddings = 0;
    cfg->normalize = 0;
    cfg->bos_token_id = 1;
    cfg->eos_token_id = 2;
    if (get_bool(root, "use_output_gate", &cfg->use_output_gate, err) ||
        get_bool(root, "tie_word_embeddings", &cfg->tie_word_embeddings, err) ||
        get_bool(root, "mhla_normalize", &cfg->normalize, err) ||
        get_token_id(root, "bos_token_id", &cfg->bos_token_id, err) ||
        get_token_id(root, "eos_token_id", &cfg->eos_token_id, err))
        return -1;
    return 0;
}

/* hidden_act (swish) and feature_map (relu, elu or identity). */
static int read_functions(const cJSON *root, mhla_config *cfg, mhla_error *err)
{
    const char *s;
    if (get_str(root, "hidden_act", &s, err))
        return -1;
    if (s && strcmp(s, "swish") != 0 && strcmp(s, "silu") != 0)
        return eng_fail(err, "config.json: hidden_act '%s' is not supported (expected 'swish')", s);

    if (get_str(root, "feature_map", &s, err))
        return -1;
    if (!s)
        return eng_fail(err, "config.json: feature_map is missing (relu, elu or identity)");
    if (strcmp(s, "relu") == 0)
        cfg->feature_map = MHLA_FEATURE_RELU;
    else if (strcmp(s, "elu") == 0)
        cfg->feature_map = MHLA_FEATURE_ELU;
    else if (strcmp(s, "identity") == 0)
        cfg->feature_map = MHLA_FEATURE_IDENTITY;
    else
        return eng_fail(err, "config.json: feature_map '%s' is not supported (relu, elu, identity)",
                        s);
    return 0;
}

/* The head dimensions from the shape fields, checked, into cfg. */
static int set_shape(const shape_fields *f, mhla_config *cfg, mhla_error *err)
{
    int H = f->H, Hkv = f->Hkv, C = f->C, I = f->I;
    /* Integer arithmetic exactly as the reference: int(D * expand). */
    int key_dim = (int)((double)f->D * f->expand_k), value_dim = (int)((double)f->D * f->expand_v);
    if (key_dim < H || key_dim % H)
        return eng_fail(err,
                        "config.json: key_dim %d (hidden_size * expand_k) is not a multiple "
                        "of num_heads %d",
                        key_dim, H);
    if (value_dim < H || value_dim % H)
        return eng_fail(err,
                        "config.json: value_dim %d (hidden_size * expand_v) is not a "
                        "multiple of num_heads %d",
                        value_dim, H);
    if (H % Hkv)
        return eng_fail(err, "config.json: num_heads %d is not a multiple of num_kv_heads %d", H,
                        Hkv);
    if ((key_dim / H) % 2)
        return eng_fail(err, "config.json: head_k_dim %d must be even for the rotary embedding",
                        key_dim / H);
    /* Bounds that keep every per-head buffer small enough for the stack. */
    if (key_dim / H > 4096 || value_dim / H > 4096)
        return eng_fail(err, "config.json: head dimensions %d x %d exceed the limit of 4096",
                        key_dim / H, value_dim / H);
    if (C > 4096)
        return eng_fail(err, "config.json: mhla_chunk_size %d exceeds the limit of 4096", C);
    if (I < 0) {
        int raw = (int)((double)f->D * f->hidden_ratio * 2.0 / 3.0);
        I = 256 * ((raw + 255) / 256);
    }
    cfg->vocab_size = f->V;
    cfg->hidden_size = f->D;
    cfg->num_layers = f->L;
    cfg->num_heads = H;
    cfg->num_kv_heads = Hkv;
    cfg->head_k_dim = key_dim / H;
    cfg->head_v_dim = value_dim / H;
    cfg->intermediate_size = I;
    cfg->chunk_size = C;
    cfg->norm_eps = (float)f->eps;
    return 0;
}

static int parse_fields(const cJSON *root, mhla_config *cfg, mhla_error *err)
{
    shape_fields f;
    if (check_kind(root, err) || read_shape(root, &f, err) || read_flags(root, cfg, err) ||
        read_functions(root, cfg, err))
        return -1;
    return set_shape(&f, cfg, err);
}

int eng_config_parse(const char *json, size_t len, mhla_config *cfg, mhla_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return eng_fail(err, "config.json: not valid JSON");
    int rc = 0;
    if (!cJSON_IsObject(root))
        rc = eng_fail(err, "config.json: top level must be a JSON object");
    else
        rc = parse_fields(root, cfg, err);
    cJSON_Delete(root);
    return rc;
}
