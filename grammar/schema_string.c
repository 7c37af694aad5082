/*
 * schema_string.c — strings: plain, bounded in length (characters, as the
 * validator counts them: one raw character or one escape each), a format
 * (date, time, date-time, uuid, email), or a pattern (schema_regex.c). Two of
 * length, format and pattern on one string are refused: the grammar would
 * have to intersect them.
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

static int dup_name(sc_conv *c, const char *rule, char **body)
{
    *body = strdup(rule);
    return *body ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
}

static int string_format(sc_conv *c, const char *format, char **body)
{
    static const char *const formats[][2] = {
        {"date", "date-string"}, {"time", "time-string"},   {"date-time", "date-time-string"},
        {"uuid", "uuid"},        {"email", "email-string"}, {"idn-email", "email-string"},
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(format, formats[i][0]) != 0)
            continue;
        const char *rule;
        int rc = sc_rule_builtin(c, formats[i][1], &rule);
        return rc ? rc : dup_name(c, rule, body);
    }
    size_t old = sc_path_push(c, "format");
    int rc = sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: format '%.60s' is not served", format);
    sc_path_pop(c, old);
    return rc;
}

static int string_length(sc_conv *c, long min, long max, char **body)
{
    const char *ch;
    if (max > SC_MAX_REPEAT)
        max = SC_MAX_REPEAT; /* a subset: at most SC_MAX_REPEAT characters */
    if (max >= 0 && min > max)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: minLength > maxLength: no value");
    int rc = sc_rule_builtin(c, "char", &ch);
    if (rc)
        return rc;
    sc_buf b = {0};
    sc_buf_add(&b, "\"\\\"\" ");
    sc_repeat(&b, ch, min < 0 ? 0 : min, max, NULL);
    sc_buf_add(&b, " \"\\\"\"");
    if (b.err) {
        sc_buf_free(&b);
        return sc_buf_fail(c, &b);
    }
    *body = b.p;
    return 0;
}

int sc_build_string(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body)
{
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(schema, "pattern");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(schema, "format");
    long min, max;
    int rc = sc_count(c, schema, "minLength", &min);
    if (!rc)
        rc = sc_count(c, schema, "maxLength", &max);
    if (rc)
        return rc;
    int n = (pattern != NULL) + (format != NULL) + (min >= 0 || max >= 0);
    if (n > 1)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: two of pattern, format and minLength/maxLength on one string are "
                       "not served");
    *used |= sc_kw_bit("minLength") | sc_kw_bit("maxLength") | sc_kw_bit("pattern") |
             sc_kw_bit("format");
    if (pattern && !cJSON_IsString(pattern))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'pattern' must be a string");
    if (format && !cJSON_IsString(format))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'format' must be a string");
    if (pattern) {
        size_t old = sc_path_push(c, "pattern");
        rc = sc_regex(c, pattern->valuestring, name, body);
        sc_path_pop(c, old);
        return rc;
    }
    if (format)
        return string_format(c, format->valuestring, body);
    if (min >= 0 || max >= 0)
        return string_length(c, min, max, body);
    const char *rule;
    rc = sc_rule_builtin(c, "string", &rule);
    return rc ? rc : dup_name(c, rule, body);
}
