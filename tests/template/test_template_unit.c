/* test_template_unit.c — the template renderer on small cases: each
 * feature against the text jinja2 gives, errors with their messages and
 * codes, Undefined, and the caps against hostile templates (each must end
 * with MHLA_TPL_LIMIT in bounded time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "template.h"

typedef struct {
    const char *src, *ctx, *want; /* want: the output, or for an error a part of its message */
    int rc;
} tcase;

#define CTX                                                                                        \
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"},"                                  \
    " {\"role\": \"user\", \"content\": \"Hi\"}], \"n\": 3, \"f\": 1.5,"                           \
    " \"s\": \"  Ab c  \", \"d\": {\"b\": 2, \"a\": [1, \"x\"]}, \"t\": true}"

static const tcase cases[] = {
    /* output, literals, Python's str() */
    {"a{{ 1 }}b{{ 'x' }}{{ none }}{{ True }}{{ 1.0 }}{{ 2.50 }}", NULL, "a1bxNoneTrue1.02.5", 0},
    {"{{ [1, 'a', none, true] }}{{ {'k': \"it's\"} }}{{ (1,) }}", NULL,
     "[1, 'a', None, True]{'k': \"it's\"}(1,)", 0},
    {"{{ 'a\\nb\\t\\u00e9\\x41' }}", NULL,
     "a\nb\t\xc3\xa9"
     "A",
     0},
    {"{{ 1e20 }} {{ 0.0001 }} {{ 1/3 }}", NULL, "1e+20 0.0001 0.3333333333333333", 0},
    /* transformers' generation tag: its body, in a scope of its own */
    {"{% set x = 1 %}{% generation %}{% set x = 2 %}[{{ x }}]{% endgeneration %}{{ x }}", NULL,
     "[2]1", 0},
    {"{% for m in [1,2] %}{% generation %}{{ m }}{% endgeneration %}\n{% endfor %}", NULL, "12", 0},
    /* operators */
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}", NULL,
     "3 -4 1 2 1024 3.5", 0},
    {"{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 + 1.5 }}", NULL,
     "a1None abab [1, 2] 2.5", 0},
    {"{{ 1 < 2 and 'x' or 'y' }} {{ not 0 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }}", NULL,
     "x True True True", 0},
    {"{{ 'y' if n > 2 else 'n' }}{{ 'z' if false }}|", CTX, "y|", 0},
    /* whitespace control, trim_blocks, lstrip_blocks, comments, raw */
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc\n", NULL, "a\n  b\nc", 0},
    {"a  {{- ' b ' -}}  c{# note #}\n{%- if 1 +%}  d{% endif %}", NULL, "a b c  d", 0},
    {"{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}", 0},
    /* if / for / loop */
    {"{% if n == 1 %}one{% elif n == 3 %}three{% else %}other{% endif %}", CTX, "three", 0},
    {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
     "{{ loop.length }}{{ loop.revindex }}{% endfor %}",
     CTX, "10TrueFalse2221FalseTrue21", 0},
    {"{% for m in messages %}{{ loop.previtem is defined }}-{{ loop.nextitem is defined }};{% endfor %}",
     CTX, "False-True;True-False;", 0},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 3 %}{% break %}"
     "{% endif %}{{ i }}{% endfor %}",
     NULL, "013", 0},
    {"{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty", 0},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", CTX, "b=2;a=[1, 'x'];", 0},
    {"{% for m in messages if m.role != 'system' %}{{ m.content }}{{ loop.length }}{% endfor %}",
     CTX, "Hi1", 0},
    {"{% for x in range(3) %}{% set y = x %}{% endfor %}{{ y }}|", NULL, "|", 0},
    /* set, namespace, set blocks */
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}x{{ a }}{% endset %}{{ c }}", NULL, "12x1", 0},
    {"{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'user' %}"
     "{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
     CTX, "True", 0},
    /* macros and call */
    {"{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", NULL,
     "<1B><23>", 0},
    {"{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}", NULL, "[in]", 0},
    /* access, slicing */
    {"{{ d.a[1] }}{{ d['b'] }}{{ messages[-1].content }}{{ 'hello'[1:3] }}{{ [1,2,3][::-1] }}", CTX,
     "x2Hiel[3, 2, 1]", 0},
    {"{{ 'h\xc3\xa9llo'[::-1] }}{{ 'h\xc3\xa9llo'[1] }}", NULL, "oll\xc3\xa9h\xc3\xa9", 0},
    /* filters */
    {"{{ s|trim }}|{{ s|length }}|{{ messages|length }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}", CTX,
     "Ab c|8|2|ABCabc", 0},
    {"{{ d|tojson }}|{{ d|tojson(indent=2) }}", CTX,
     "{\"b\": 2, \"a\": [1, \"x\"]}|{\n  \"b\": 2,\n  \"a\": [\n    1,\n    \"x\"\n  ]\n}", 0},
    {"{{ '\xc3\xa9\"\\n'|tojson }}", NULL, "\"\xc3\xa9\\\"\\n\"", 0},
    {"{{ messages|map(attribute='role')|join(', ') }}", CTX, "system, user", 0},
    {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
     "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='content')|first }}",
     CTX, "1S", 0},
    {"{{ x|default('dflt') }}{{ ''|d('e', true) }}{{ [3,1,2]|sort|list }}{{ [1,2]|last }}", NULL,
     "dflte[1, 2, 3]2", 0},
    {"{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}{{ 'a-b'|replace('-', '+') }}", NULL,
     "Hello WorldHelloa+b", 0},
    {"{{ '3'|int + 1 }}{{ 2|float }}{{ -3|abs }}{{ 2.567|round(2) }}{{ [1,1,2]|unique|list }}",
     NULL, "42.032.57[1, 2]", 0},
    {"{{ 'a\\nb'|indent(2) }}|{{ d|items|list }}|{{ 5|string }}", CTX,
     "a\n  b|[('b', 2), ('a', [1, 'x'])]|5", 0},
    /* found by a random differential run against jinja2 */
    {"{{ 0.5 is even }}{{ 4.0 is even }}{{ 3|round }}{{ 'bA'|sort|join }}{{ [1, 2, 1].count(1) }}"
     "{{ [1, 2].index(2) }}[{{ none[::-1] }}]",
     NULL, "FalseTrue3Ab21[]", 0},
    {"{{ x|int }}", NULL, "undefined", MHLA_TPL_ERROR},
    {"x {%- raw -%}  {{ y }}  {%- endraw -%} z|{{ -0.0 }}|{% for i in range(3) %}"
     "{{ loop.cycle('a', 'b') }}{% endfor %}|{% macro m(a) %}{{ varargs }}{% endmacro %}{{ m(1, 2) }}",
     NULL, "x{{ y }}z|-0.0|aba|(2,)", 0},
    /* raw: no newline trimmed after its opening tag, lstrip_blocks before endraw, "+%}" is
     * not a raw opening (jinja2's lexer) */
    {"{% raw %}\n a\n  {% endraw %}\nb", NULL, "\n a\nb", 0},
    {"{% raw +%}x{% endraw %}", NULL, "unknown tag", MHLA_TPL_ERROR},
    /* printf-style formatting */
    {"{{ '%s-%d|%5.2f|%-4s|%04d|%x|%%|%r|%.2s' % ('a', 1, 3.14159, 'ab', 42, 255, 'q', 'xyz') }}",
     NULL, "a-1| 3.14|ab  |0042|ff|%|'q'|xy", 0},
    {"{{ '%s %s' % ('a',) }}", NULL, "too few", MHLA_TPL_ERROR},
    /* Unicode case mapping and the is lower/upper tests on str() of any value */
    {"{{ 'h\xc3\xa9llo w\xc3\xb6rld-\xc3\xa9"
     "a'|title }}|{{ 'stra\xc3\x9f"
     "e'|upper }}|"
     "{{ '\xc3\x80"
     "B'|lower }}|{{ 'abc1' is lower }}{{ '123' is lower }}{{ (1, 'x') is lower }}",
     NULL,
     "H\xc3\xa9llo W\xc3\xb6rld-\xc3\x89"
     "a|STRASSE|\xc3\xa0"
     "b|TrueFalseTrue",
     0},
    /* Markup: |safe + a string escapes the string; ~ gives a plain string */
    {"{{ '<a>'|safe + '<b>' }}|{{ '\"x\"' + '&'|safe }}|{{ '<i>'|e }}|{{ '<a>'|safe ~ '<b>' }}",
     NULL, "<a>&lt;b&gt;|&#34;x&#34;&|&lt;i&gt;|<a><b>", 0},
    /* tests */
    {"{{ x is defined }}{{ n is number }}{{ s is string }}{{ d is mapping }}{{ none is none }}"
     "{{ messages is iterable }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ t is true }}",
     CTX, "FalseTrueTrueTrueTrueTrueTrueTrueTrue", 0},
    {"{{ n is not string }}{{ n is integer }}{{ f is integer }}{{ 'a' is eq 'a' }}", CTX,
     "TrueTrueFalseTrue", 0},
    /* Python's whitespace (str.isspace) and repr's escapes beyond ASCII */
    {"{{ '\xc2\xa0 a\xe2\x80\x83"
     "b \xe3\x80\x80'|trim }}|{{ ' a  b \n'.split(none, 1) }}|"
     "{{ ['\xc2\xa0\xe2\x80\x8d\xc3\xa9'] }}",
     NULL,
     "a\xe2\x80\x83"
     "b|['a', 'b \\n']|['\\xa0\\u200d\xc3\xa9']",
     0},
    /* methods */
    {"{{ ' xx '.strip() }}{{ 'xxay'.lstrip('x') }}{{ 'a,b,c'.split(',') }}{{ 'a b'.split() }}",
     NULL, "xxay['a', 'b', 'c']['a', 'b']", 0},
    {"{{ 'a,b,c'.split(',', 1) }}{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}", NULL,
     "['a', 'b,c']TrueTrue", 0},
    {"{{ d.get('b') }}{{ d.get('z', 9) }}{{ d.keys()|list }}{{ '-'.join(['a', 'b']) }}", CTX,
     "29['b', 'a']a-b", 0},
    {"{{ '{} is {}'.format('x', 1) }}{{ 'Ab'.upper() }}{{ 'aB'.title() }}", NULL, "x is 1ABAb", 0},
    {"{{ dict(a=1) }}", NULL, "{'a': 1}", 0},
    /* Undefined */
    {"[{{ x }}][{{ x|length }}][{% for i in x %}{% endfor %}][{{ x is undefined }}][{{ d.z }}]",
     CTX, "[][0][][True][]", 0},
    {"{{ x.y }}", NULL, "'x' is undefined", MHLA_TPL_ERROR},
    {"{{ x + 1 }}", NULL, "undefined", MHLA_TPL_ERROR},
    /* errors */
    {"{{ raise_exception('no system role!') }}", NULL, "no system role!", MHLA_TPL_RAISED},
    {"line1\n{% if %}", NULL, "line 2", MHLA_TPL_ERROR},
    {"{% for x in y %}", NULL, "endfor", MHLA_TPL_ERROR},
    {"{{ 1 + }}", NULL, "unexpected", MHLA_TPL_ERROR},
    {"{% frobnicate %}", NULL, "unknown tag", MHLA_TPL_ERROR},
    {"{{ 'a' < 1 }}", NULL, "not supported", MHLA_TPL_ERROR},
    {"{{ [1].append(2) }}", NULL, "unsafe", MHLA_TPL_ERROR},
    {"{{ 1 // 0 }}", NULL, "zero", MHLA_TPL_ERROR},
    {"{{ x|nosuchfilter }}", NULL, "no filter named", MHLA_TPL_ERROR},
    {"{{ 'abc", NULL, "", MHLA_TPL_ERROR},
    {"{% set a, b = [1] %}", NULL, "not enough values", MHLA_TPL_ERROR},
    /* caps: hostile templates end with an error in bounded time */
    {"{% for i in range(100000000) %}{% endfor %}", NULL, "iterations", MHLA_TPL_LIMIT},
    {"{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}{% endfor %}"
     "{% endfor %}{% endfor %}",
     NULL, "", MHLA_TPL_LIMIT},
    {"{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}{{ ns.s }}",
     NULL, "limit", MHLA_TPL_LIMIT},
    {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "deeper", MHLA_TPL_LIMIT},
    {"{% macro f(n) %}{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{{ f(n + 1) }}{% endif %}{% endif %}"
     "{% endif %}{% endif %}{% endmacro %}{{ f(0) }}",
     NULL, "deeper", MHLA_TPL_LIMIT},
    {"{{ 'x' * 100000000000 }}", NULL, "too large", MHLA_TPL_LIMIT},
    {"{% for i in range(100000) %}{{ 'abcdefghij' * 100 }}{% endfor %}", NULL, "output longer",
     MHLA_TPL_LIMIT},
};

static void run_case(const tcase *c, const mhla_tpl_limits *lim)
{
    char err[512] = "", *out = NULL;
    size_t len = 0;
    mhla_tpl *t = NULL;
    cJSON *ctx = c->ctx ? cJSON_Parse(c->ctx) : NULL;
    int rc = mhla_tpl_compile(c->src, strlen(c->src), &t, err, sizeof err);
    if (!rc)
        rc = mhla_tpl_render(t, ctx, lim, &out, &len, err, sizeof err);
    if (c->rc == 0)
        CHECK(rc == 0 && len == strlen(c->want) && !memcmp(out, c->want, len),
              "%s\n  got rc %d [%s] err [%s]\n  want [%s]", c->src, rc, out ? out : "", err,
              c->want);
    else
        CHECK(rc == c->rc && strstr(err, c->want) && !out, "%s\n  got rc %d err [%s], want %d [%s]",
              c->src, rc, err, c->rc, c->want);
    free(out);
    mhla_tpl_free(t);
    cJSON_Delete(ctx);
}

/* Deeply nested expressions and blocks are refused at compile time. */
static void check_nesting(void)
{
    mhla_buf b = {0};
    for (int i = 0; i < 5000; i++)
        mhla_buf_put(&b, "{% if 1 %}", 10);
    mhla_tpl *t = NULL;
    char err[256] = "";
    CHECK(mhla_tpl_compile(b.p, b.len, &t, err, sizeof err) == MHLA_TPL_ERROR && !t &&
              strstr(err, "too deep"),
          "deep blocks: %s", err);
    b.len = 0;
    mhla_buf_put(&b, "{{ ", 3);
    for (int i = 0; i < 5000; i++)
        mhla_buf_put(&b, "(", 1);
    CHECK(mhla_tpl_compile(b.p, b.len, &t, err, sizeof err) == MHLA_TPL_ERROR && !t,
          "deep parentheses: %s", err);
    mhla_buf_free(&b);
}

int main(void)
{
    mhla_tpl_limits lim = {.max_output = 1 << 20, .max_memory = 64 << 20};
    double t0 = mhla_now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], &lim);
    check_nesting();
    double secs = mhla_now() - t0;
    CHECK(secs < 20, "the cases took %.1f s", secs);
    printf("%zu cases, %d failures, %.2f s\n", sizeof cases / sizeof cases[0], failures, secs);
    return failures ? 1 : 0;
}
