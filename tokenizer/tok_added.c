/* Added tokens: a byte trie for greedy longest-match splitting of the input around
 * added-token occurrences, and the reference's lstrip / rstrip neighbour trimming. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct {
    int32_t first_child, next_sibling, value; /* value: added-token index or -1 */
    unsigned char byte;
} trie_node;

struct tok_trie {
    trie_node *nodes;
    int n, cap; /* node indices are int32_t */
};

static int32_t new_node(tok_trie *t, unsigned char byte)
{
    if (t->n == INT32_MAX || mhla_grow(&t->nodes, sizeof *t->nodes, &t->cap, t->n + 1))
        return -1;
    t->nodes[t->n] = (trie_node){-1, -1, -1, byte};
    return (int32_t)t->n++;
}

tok_trie *tok_trie_new(void)
{
    tok_trie *t = calloc(1, sizeof *t);
    if (t && new_node(t, 0) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

int tok_trie_add(tok_trie *t, const char *s, size_t n, int32_t value)
{
    int32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        int32_t c = t->nodes[cur].first_child;
        while (c >= 0 && t->nodes[c].byte != b)
            c = t->nodes[c].next_sibling;
        if (c < 0) {
            c = new_node(t, b);
            if (c < 0)
                return -1;
            t->nodes[c].next_sibling = t->nodes[cur].first_child;
            t->nodes[cur].first_child = c;
        }
        cur = c;
    }
    if (cur != 0)
        t->nodes[cur].value =
            value; /* a repeated content: the last definition wins, as in the reference */
    return 0;
}

size_t tok_trie_match(const tok_trie *t, const char *s, size_t n, int32_t *value)
{
    int32_t cur = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        int32_t c = t->nodes[cur].first_child;
        while (c >= 0 && t->nodes[c].byte != b)
            c = t->nodes[c].next_sibling;
        if (c < 0)
            break;
        cur = c;
        if (t->nodes[cur].value >= 0) {
            best = i + 1;
            *value = t->nodes[cur].value;
        }
    }
    return best;
}

void tok_trie_free(tok_trie *t)
{
    if (!t)
        return;
    free(t->nodes);
    free(t);
}

static int push_section(tok_section **v, size_t *n, size_t *cap, size_t a, size_t e, int32_t added)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        tok_section *p = realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = (tok_section){a, e, added};
    return 0;
}

int tok_added_split(const tok_trie *trie, const tok_added *added, const char *s, size_t n,
                    tok_section **out, size_t *n_out, char *err, size_t errlen)
{
    tok_section *v = NULL;
    size_t nv = 0, cap = 0, start = 0, i = 0;
    bool any = trie && trie->nodes[0].first_child >= 0;
    while (any && i < n) {
        int32_t val = -1;
        size_t m = tok_trie_match(trie, s + i, n - i, &val);
        if (m) {
            if ((i > start && push_section(&v, &nv, &cap, start, i, -1)) ||
                push_section(&v, &nv, &cap, i, i + m, val))
                goto oom;
            i += m;
            start = i;
        } else {
            i++;
        }
    }
    if (start < n && push_section(&v, &nv, &cap, start, n, -1))
        goto oom;
    for (size_t k = 0; k < nv; k++) {
        if (v[k].added < 0)
            continue;
        const tok_added *a = &added[v[k].added];
        size_t x, y;
        if (a->lstrip && k > 0) {
            tok_js_trim(s + v[k - 1].start, v[k - 1].end - v[k - 1].start, false, true, &x, &y);
            v[k - 1].end = v[k - 1].start + y;
        }
        if (a->rstrip && k + 1 < nv) {
            tok_js_trim(s + v[k + 1].start, v[k + 1].end - v[k + 1].start, true, false, &x, &y);
            v[k + 1].start += x;
        }
    }
    *out = v;
    *n_out = nv;
    return 0;
oom:
    free(v);
    tok_err(err, errlen, "out of memory splitting on added tokens");
    return -1;
}
