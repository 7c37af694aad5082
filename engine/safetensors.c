/*
 * safetensors.c — memory-maps safetensors files and validates every header
 * entry against the file before anything reads tensor data.
 */
#include "engine_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER_BYTES (100u << 20)

static const struct {
    const char *name;
    st_dtype dtype;
    int size;
} DTYPES[] = {
    {"F32", ST_F32, 4},    {"F16", ST_F16, 2},       {"BF16", ST_BF16, 2},     {"F64", ST_OTHER, 8},
    {"I64", ST_OTHER, 8},  {"I32", ST_OTHER, 4},     {"I16", ST_OTHER, 2},     {"I8", ST_OTHER, 1},
    {"U8", ST_OTHER, 1},   {"U16", ST_OTHER, 2},     {"U32", ST_OTHER, 4},     {"U64", ST_OTHER, 8},
    {"BOOL", ST_OTHER, 1}, {"F8_E4M3", ST_OTHER, 1}, {"F8_E5M2", ST_OTHER, 1},
};

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int read_u64_le(const unsigned char *p, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    *out = v;
    return 0;
}

/* A JSON number that is a non-negative integer representable exactly. */
static int json_uint(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return -1;
    double d = it->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

static int map_file(const char *path, st_mapping *m, mhla_error *err)
{
    const char *name = base_name(path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return eng_fail_as(err, MHLA_ERR_IO, "cannot open %s: %s", name, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return eng_fail_as(err, MHLA_ERR_IO, "cannot stat %s: %s", name, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return eng_fail(err, "%s is not a regular file", name);
    }
    m->size = (size_t)sb.st_size;
    m->base = NULL;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return eng_fail_as(err, MHLA_ERR_IO, "cannot map %s: %s", name, strerror(e));
        }
        m->base = p;
    }
    close(fd);
    m->path = strdup(path);
    if (!m->path)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    return 0;
}

static int add_tensor(st_set *set, int *cap, const st_tensor *t, mhla_error *err)
{
    if (mhla_grow(&set->tensors, sizeof *set->tensors, cap, set->n_tensors + 1))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    set->tensors[set->n_tensors++] = *t;
    return 0;
}

/* The element size of dtype name (0: unknown), with t's dtype and its name set. */
static int entry_dtype(const char *dtype, st_tensor *t)
{
    int esize = 0;
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(dtype, DTYPES[i].name) == 0) {
            t->dtype = DTYPES[i].dtype;
            esize = DTYPES[i].size;
        }
    if (esize)
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtype);
    return esize;
}

/* t's shape from the header's array sh, and its element count in *numel. */
static int entry_shape(const cJSON *sh, st_tensor *t, uint64_t *numel, const char *fname,
                       const char *name, mhla_error *err)
{
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ST_MAX_DIMS)
        return eng_fail(err, "%s: bad header: tensor '%s' has no valid shape array", fname, name);
    t->ndim = cJSON_GetArraySize(sh);
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (json_uint(cJSON_GetArrayItem(sh, i), &d) || d > (1ull << 40))
            return eng_fail(err, "%s: bad header: tensor '%s' has an invalid shape dimension",
                            fname, name);
        t->shape[i] = (int64_t)d;
        if (d && *numel > (UINT64_MAX / 16) / d)
            return eng_fail(err, "%s: bad header: tensor '%s' shape is too large", fname, name);
        *numel *= d;
    }
    return 0;
}

static int parse_entry(const cJSON *e, const st_mapping *m, const unsigned char *data,
                       uint64_t data_len, st_tensor *t, mhla_error *err)
{
    const char *fname = base_name(m->path);
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return eng_fail(err, "%s: bad header: entry for tensor '%s' is not an object", fname, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return eng_fail(err, "%s: bad header: tensor '%s' has no dtype string", fname, name);
    int esize = entry_dtype(dt->valuestring, t);
    if (!esize)
        return eng_fail(err, "%s: tensor '%s' has unknown dtype '%.15s'", fname, name,
                        dt->valuestring);
    uint64_t numel = 1;
    if (entry_shape(sh, t, &numel, fname, name, err))
        return -1;
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        json_uint(cJSON_GetArrayItem(off, 0), &begin) ||
        json_uint(cJSON_GetArrayItem(off, 1), &end))
        return eng_fail(err, "%s: bad header: tensor '%s' has no valid data_offsets", fname, name);
    if (end < begin)
        return eng_fail(err, "%s: tensor '%s' has data_offsets end %llu before begin %llu", fname,
                        name, (unsigned long long)end, (unsigned long long)begin);
    if (end - begin != numel * (uint64_t)esize)
        return eng_fail(err,
                        "%s: tensor '%s' occupies %llu bytes but its shape and dtype need %llu",
                        fname, name, (unsigned long long)(end - begin),
                        (unsigned long long)(numel * (uint64_t)esize));
    if (end > data_len)
        return eng_fail(err,
                        "%s: tensor '%s' data ends at byte %llu but the file holds only %llu "
                        "data bytes (file truncated?)",
                        fname, name, (unsigned long long)end, (unsigned long long)data_len);
    t->data = data + begin;
    t->nbytes = (size_t)(end - begin);
    t->file = m->path;
    t->name = strdup(name);
    if (!t->name)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    return 0;
}

/* Parses one mapped file's header and appends its tensors to set. */
static int parse_file(st_set *set, int *cap, const st_mapping *m, mhla_error *err)
{
    const char *fname = base_name(m->path);
    if (m->size < 8)
        return eng_fail(err, "%s: file truncated: %zu bytes, too short for a safetensors header",
                        fname, m->size);
    const unsigned char *base = m->base;
    uint64_t hlen;
    read_u64_le(base, &hlen);
    if (hlen > m->size - 8)
        return eng_fail(err,
                        "%s: header of %llu bytes does not fit in the %zu-byte file (file "
                        "truncated?)",
                        fname, (unsigned long long)hlen, m->size);
    if (hlen > MAX_HEADER_BYTES)
        return eng_fail(err, "%s: header of %llu bytes exceeds the %u-byte limit", fname,
                        (unsigned long long)hlen, MAX_HEADER_BYTES);
    cJSON *root = cJSON_ParseWithLength((const char *)base + 8, (size_t)hlen);
    if (!root)
        return eng_fail(err, "%s: bad header: not valid JSON", fname);
    int rc = 0;
    if (!cJSON_IsObject(root))
        rc = eng_fail(err, "%s: bad header: not a JSON object", fname);
    const unsigned char *data = base + 8 + hlen;
    uint64_t data_len = m->size - 8 - hlen;
    for (const cJSON *e = root->child; rc == 0 && e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        if (st_find(set, e->string)) {
            rc = eng_fail(err, "%s: tensor '%s' appears more than once", fname, e->string);
            break;
        }
        st_tensor t;
        memset(&t, 0, sizeof t);
        rc = parse_entry(e, m, data, data_len, &t, err);
        if (rc == 0 && (rc = add_tensor(set, cap, &t, err)) != 0)
            free(t.name);
    }
    cJSON_Delete(root);
    return rc;
}

static int add_mapping(st_set *set, const char *path, mhla_error *err)
{
    st_mapping *nm = realloc(set->maps, (size_t)(set->n_maps + 1) * sizeof *nm);
    if (!nm)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    set->maps = nm;
    memset(&set->maps[set->n_maps], 0, sizeof set->maps[0]);
    if (map_file(path, &set->maps[set->n_maps], err))
        return -1;
    set->n_maps++;
    return 0;
}

/* The index file, with the failure's kind as the engine's code. */
static char *read_small_file(const char *path, size_t *len, mhla_error *err)
{
    char *buf, msg[512];
    int rc = mhla_read_file(path, MAX_HEADER_BYTES, &buf, len, msg, sizeof msg);
    if (rc)
        eng_fail_as(err,
                    rc == MHLA_READ_NOMEM ? MHLA_ERR_NOMEM
                    : rc == MHLA_READ_IO  ? MHLA_ERR_IO
                                          : MHLA_ERR_INVALID,
                    "%s: %s", base_name(path), msg);
    return rc ? NULL : buf;
}

/* Sharded checkpoint: every shard named in the index, and every tensor the
 * index names must be in the shard it says. */
static int open_sharded(const char *dir, const char *index_path, st_set *set, int *cap,
                        mhla_error *err)
{
    size_t len;
    char *text = read_small_file(index_path, &len, err);
    if (!text)
        return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root)
        return eng_fail(err, "model.safetensors.index.json: not valid JSON");
    int rc = 0;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        rc = eng_fail(err, "model.safetensors.index.json: no 'weight_map' object");
        goto done;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !e->valuestring[0]) {
            rc = eng_fail(err, "model.safetensors.index.json: bad shard name for tensor '%s'",
                          e->string);
            goto done;
        }
        int known = 0;
        for (int i = 0; i < set->n_maps; i++)
            if (strcmp(base_name(set->maps[i].path), e->valuestring) == 0)
                known = 1;
        if (known)
            continue;
        char *path = path_join(dir, e->valuestring);
        if (!path) {
            rc = eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
            goto done;
        }
        rc = add_mapping(set, path, err);
        free(path);
        if (rc || (rc = parse_file(set, cap, &set->maps[set->n_maps - 1], err)))
            goto done;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        const st_tensor *t = st_find(set, e->string);
        if (!t || strcmp(base_name(t->file), e->valuestring) != 0) {
            rc = eng_fail(err, "tensor '%s' is missing from shard %s named by the index", e->string,
                          e->valuestring);
            goto done;
        }
    }
done:
    cJSON_Delete(root);
    return rc;
}

int st_open_dir(const char *dir, st_set *set, mhla_error *err)
{
    memset(set, 0, sizeof *set);
    int cap = 0, rc;
    char *single = path_join(dir, "model.safetensors");
    char *index = path_join(dir, "model.safetensors.index.json");
    if (!single || !index) {
        rc = eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    } else if (access(single, F_OK) == 0) {
        rc = add_mapping(set, single, err);
        if (rc == 0)
            rc = parse_file(set, &cap, &set->maps[0], err);
    } else if (access(index, F_OK) == 0) {
        rc = open_sharded(dir, index, set, &cap, err);
    } else {
        rc = eng_fail(err, "%s holds neither model.safetensors nor model.safetensors.index.json",
                      dir);
    }
    free(single);
    free(index);
    if (rc)
        st_close(set);
    return rc;
}

const st_tensor *st_find(const st_set *set, const char *name)
{
    for (int i = 0; i < set->n_tensors; i++)
        if (strcmp(set->tensors[i].name, name) == 0)
            return &set->tensors[i];
    return NULL;
}

void st_close(st_set *set)
{
    for (int i = 0; i < set->n_tensors; i++)
        free(set->tensors[i].name);
    for (int i = 0; i < set->n_maps; i++) {
        if (set->maps[i].base)
            munmap(set->maps[i].base, set->maps[i].size);
        free(set->maps[i].path);
    }
    free(set->tensors);
    free(set->maps);
    memset(set, 0, sizeof *set);
}
