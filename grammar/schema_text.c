/*
 * schema_text.c — GBNF text pieces: string literals, class members and the
 * literal JSON text of a value (const, enum, property names). Every code
 * point outside printable ASCII is written as an escape, so the grammar text
 * is ASCII whatever the schema holds.
 */
#include "schema_internal.h"

#include <math.h>
#include <string.h>

int sc_utf8_next(const char *s, size_t n, size_t *i, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = n - *i, len;
    uint32_t v;
    if (u[0] < 0x80) {
        *cp = u[0];
        *i += 1;
        return 0;
    }
    if ((u[0] & 0xE0) == 0xC0)
        len = 2, v = u[0] & 0x1F;
    else if ((u[0] & 0xF0) == 0xE0)
        len = 3, v = u[0] & 0x0F;
    else if ((u[0] & 0xF8) == 0xF0)
        len = 4, v = u[0] & 0x07;
    else
        return -1;
    if (left < len)
        return -1;
    for (size_t k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80)
            return -1;
        v = v << 6 | (u[k] & 0x3F);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return -1; /* overlong, past Unicode, or a surrogate */
    *cp = v;
    *i += len;
    return 0;
}

static int cp_escape(sc_buf *b, uint32_t cp)
{
    if (cp < 0x80)
        return sc_buf_addf(b, "\\x%02X", (unsigned)cp);
    if (cp < 0x10000)
        return sc_buf_addf(b, "\\u%04X", (unsigned)cp);
    return sc_buf_addf(b, "\\U%08X", (unsigned)cp);
}

int sc_class_cp(sc_buf *b, uint32_t cp)
{
    int plain = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    if (plain) {
        char ch = (char)cp;
        return sc_buf_addn(b, &ch, 1);
    }
    return cp_escape(b, cp);
}

int sc_lit(sc_conv *c, sc_buf *b, const char *s, size_t n)
{
    sc_buf_add(b, "\"");
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (sc_utf8_next(s, n, &i, &cp) != 0)
            return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: a string is not valid UTF-8");
        if (cp == '"' || cp == '\\') {
            char esc[2] = {'\\', (char)cp};
            sc_buf_addn(b, esc, 2);
        } else if (cp >= 0x20 && cp < 0x7F) {
            char ch = (char)cp;
            sc_buf_addn(b, &ch, 1);
        } else {
            cp_escape(b, cp);
        }
    }
    return sc_buf_add(b, "\"");
}

/* s as a JSON string's text (quotes, escapes), non-ASCII kept as UTF-8 */
static int json_string(sc_buf *j, const char *s)
{
    sc_buf_add(j, "\"");
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        const char *esc = NULL;
        switch (*u) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc)
            sc_buf_add(j, esc);
        else if (*u < 0x20)
            sc_buf_addf(j, "\\u%04x", *u);
        else
            sc_buf_addn(j, (const char *)u, 1);
    }
    return sc_buf_add(j, "\"");
}

/* A number's text: integers as integers; others with 17 digits, which read
 * back (by any correct parser) as the same double. */
static int json_number(sc_conv *c, sc_buf *j, double v)
{
    if (!isfinite(v))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: a number is not finite");
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return sc_buf_addf(j, "%.0f", v);
    if (v == floor(v))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: an integer value beyond 2^53 is not served exactly");
    return sc_buf_addf(j, "%.17g", v);
}

static int json_text(sc_conv *c, sc_buf *j, const cJSON *v)
{
    if (cJSON_IsString(v))
        return json_string(j, v->valuestring);
    if (cJSON_IsNumber(v))
        return json_number(c, j, v->valuedouble);
    if (cJSON_IsBool(v))
        return sc_buf_add(j, cJSON_IsTrue(v) ? "true" : "false");
    if (cJSON_IsNull(v))
        return sc_buf_add(j, "null");
    int is_obj = cJSON_IsObject(v), rc = 0;
    sc_buf_add(j, is_obj ? "{" : "[");
    for (const cJSON *e = v->child; e && !rc; e = e->next) {
        if (e != v->child)
            sc_buf_add(j, ",");
        if (is_obj) {
            json_string(j, e->string);
            sc_buf_add(j, ":");
        }
        rc = json_text(c, j, e);
    }
    if (rc)
        return rc;
    return sc_buf_add(j, is_obj ? "}" : "]");
}

int sc_json_lit(sc_conv *c, sc_buf *b, const cJSON *v)
{
    sc_buf j = {0};
    int rc = json_text(c, &j, v);
    if (!rc && j.err)
        rc = sc_buf_fail(c, &j);
    if (!rc)
        rc = sc_lit(c, b, j.p ? j.p : "", j.n);
    sc_buf_free(&j);
    return rc;
}
