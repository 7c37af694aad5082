/*
 * test_mask.c — the fast token mask (per-top classes plus run-time checks of
 * the uncertain tokens) equals the reference mask (every token's bytes run
 * against the row's stacks), on random grammars built in the compiled form,
 * random small vocabularies (byte strings with UTF-8 fragments, single
 * bytes, special, end and empty tokens) and random prefixes; and targeted
 * cases: a token ending exactly at a rule's end, end ids only when the string
 * is whole, special tokens never.
 */
#include "check.h"
#include "grammar_internal.h"
#include "ir_build.h"
#include "mask_internal.h"

#include <stdio.h>
#include <string.h>

#define MAXV 320
#define WORDS ((MAXV + 63) / 64)

/* The bytes grammars and tokens are drawn from: a few ASCII characters and
 * the bytes of é (C3 A9) and € (E2 82 AC), so tokens split characters. */
static const char ALPHA[] = "ab\"{} ,\xC3\xA9\xE2\x82\xAC";
#define N_ALPHA (sizeof ALPHA - 1)

typedef struct {
    char *bytes[MAXV];
    size_t lens[MAXV];
    unsigned char special[MAXV];
    int32_t eos[2];
    int n, n_eos;
} rvocab;

static struct {
    long grammars, prefixes, steps, compared, allowed, skipped, tops, top_tokens, uncertain, deep;
} stat;

/* ---- random grammars and vocabularies ------------------------------------ */

static void random_item(ir *b)
{
    int k = rnd(8);
    if (k < 4) {
        char one[2] = {ALPHA[rnd((int)N_ALPHA)], 0};
        ir_lit(b, one);
    } else if (k < 6) {
        char set[5] = {0};
        for (int i = 0; i < 4; i++)
            set[i] = ALPHA[rnd((int)N_ALPHA)];
        ir_set(b, set);
    } else if (k == 6) {
        ir_lit(b, rnd(2) ? "\xC3\xA9" : "\xE2\x82\xAC");
    } else {
        ir_range(b, 0x80, 0xBF);
    }
}

/* One alternative of rule r (of nr): it refers to earlier rules anywhere and
 * to any rule only after a byte element, so there is no left recursion. */
static void random_alt(ir *b, int r, int nr)
{
    int ni = rnd(5), consumed = 0;
    for (int i = 0; i < ni; i++) {
        if (rnd(10) < 4 && (r > 0 || consumed)) {
            ir_ref(b, (uint32_t)(consumed ? rnd(nr) : rnd(r)));
            continue;
        }
        random_item(b);
        consumed = 1;
    }
}

/* Up to six rules of up to three alternatives; root is the last. */
static mhla_grammar *random_grammar(void)
{
    ir b;
    ir_init(&b);
    int nr = 1 + rnd(6);
    for (int r = 0; r < nr; r++) {
        ir_rule(&b);
        int na = 1 + rnd(3);
        for (int a = 0; a < na; a++) {
            if (a)
                ir_alt(&b);
            random_alt(&b, r, nr);
        }
        ir_end(&b);
    }
    mhla_grammar *g = ir_finish(&b, (uint32_t)(nr - 1));
    if (!g)
        die("out of memory building a grammar");
    return g;
}

static void vocab_put(rvocab *rv, const char *p, size_t n)
{
    rv->bytes[rv->n] = malloc(n ? n : 1);
    memcpy(rv->bytes[rv->n], p, n);
    rv->lens[rv->n] = n;
    rv->special[rv->n++] = 0;
}

static void random_vocab(rvocab *rv)
{
    memset(rv, 0, sizeof *rv);
    for (size_t i = 0; i < N_ALPHA; i++)
        vocab_put(rv, &ALPHA[i], 1);
    vocab_put(rv, "a", 1); /* a duplicate */
    vocab_put(rv, "", 0);  /* empty: never allowed */
    vocab_put(rv, "a", 1); /* special below */
    rv->special[rv->n - 1] = 1;
    vocab_put(rv, "<e>", 3); /* the end id */
    rv->special[rv->n - 1] = 1;
    rv->eos[rv->n_eos++] = rv->n - 1;
    int extra = 40 + rnd(MAXV - 60);
    for (int t = 0; t < extra; t++) {
        char buf[8];
        size_t n = 1 + (size_t)rnd(7);
        for (size_t i = 0; i < n; i++)
            buf[i] = ALPHA[rnd((int)N_ALPHA)];
        vocab_put(rv, buf, n);
    }
}

static void rvocab_free(rvocab *rv)
{
    for (int i = 0; i < rv->n; i++)
        free(rv->bytes[i]);
}

/* ---- one random walk ------------------------------------------------------ */

/* Fast and slow masks agree here; returns the fast mask's count, or -1 when
 * the stacks hit a compile cap (the walk is given up, counted as skipped). */
static int compare_step(mhla_grammar_matcher *m, uint64_t *fast, int n)
{
    uint64_t slow[WORDS];
    mhla_grammar_error err;
    int cf = mhla_grammar_matcher_mask(m, fast, &err);
    int cs = mhla_grammar_matcher_mask_slow(m, slow, &err);
    if (cf == MHLA_GRAMMAR_LIMIT || cs == MHLA_GRAMMAR_LIMIT)
        return -1;
    if (cf < 0 || cs < 0)
        die("mask: %s", err.msg);
    CHECK(cf == cs, "fast mask allows %d tokens, slow %d", cf, cs);
    for (int id = 0; id < n; id++)
        CHECK((fast[id >> 6] >> (id & 63) & 1) == (slow[id >> 6] >> (id & 63) & 1),
              "token %d: fast %d slow %d", id, (int)(fast[id >> 6] >> (id & 63) & 1),
              (int)(slow[id >> 6] >> (id & 63) & 1));
    stat.steps++;
    stat.compared += n;
    stat.allowed += cf;
    return cf;
}

/* A token the mask refuses is refused by accept, and the row is unchanged. */
static void check_refusal(mhla_grammar_matcher *m, const uint64_t *mask, int n)
{
    int id = rnd(n);
    if (mask[id >> 6] >> (id & 63) & 1)
        return;
    mhla_grammar_error err;
    uint64_t after[WORDS];
    CHECK(mhla_grammar_matcher_accept(m, id, &err) == MHLA_GRAMMAR_REJECTED,
          "token %d outside the mask was accepted", id);
    if (mhla_grammar_matcher_mask(m, after, &err) >= 0)
        CHECK(memcmp(after, mask, (size_t)(n + 63) / 64 * 8) == 0,
              "a refused token changed the row");
}

static int pick(const uint64_t *mask, const rvocab *rv, int count)
{
    int k = rnd(count);
    for (int id = 0; id < rv->n; id++)
        if ((mask[id >> 6] >> (id & 63) & 1) && k-- == 0)
            return id;
    return -1;
}

static void walk(mhla_grammar_tokens *t, const rvocab *rv)
{
    mhla_grammar_matcher *m;
    mhla_grammar_error err;
    uint64_t mask[WORDS];
    if (mhla_grammar_matcher_create(t, &m, &err))
        die("matcher: %s", err.msg);
    stat.prefixes++;
    for (int step = 0; step < 16; step++) {
        int count = compare_step(m, mask, rv->n);
        if (count <= 0) {
            stat.skipped += count < 0;
            break;
        }
        check_refusal(m, mask, rv->n);
        int id = pick(mask, rv, count);
        if (mhla_grammar_matcher_accept(m, id, &err))
            CHECK(0, "token %d of the mask was refused: %s", id, err.msg);
        if (id == rv->eos[0]) {
            CHECK(mhla_grammar_matcher_done(m), "done after the end id");
            CHECK(compare_step(m, mask, rv->n) == 1, "after the end id only it is allowed");
            break;
        }
    }
    mhla_grammar_matcher_free(m);
}

static void count_classes(const mhla_grammar_tokens *t, const rvocab *rv)
{
    int byte_tokens = 0;
    for (int i = 0; i < rv->n; i++)
        byte_tokens += !rv->special[i] && rv->lens[i] > 0;
    for (uint32_t p = 0; p < t->g->n_elems; p++) {
        if (!t->by_elem[p])
            continue;
        stat.tops++;
        stat.top_tokens += byte_tokens;
        stat.uncertain += t->by_elem[p]->n_uncertain;
    }
    stat.deep += gr_deep_count(t->deep);
}

/* Every other grammar deepens at any uncertain token (the suffix classes of
 * mask_deep.c), the others at the default threshold. */
static void random_case(int i)
{
    gr_mask_deeper_at = i % 2 ? 0 : GR_MASK_DEEPER;
    mhla_grammar_error err;
    mhla_grammar *g = random_grammar();
    rvocab rv;
    random_vocab(&rv);
    mhla_grammar_vocab *v;
    mhla_grammar_tokens *t;
    if (mhla_grammar_vocab_create(rv.n, (const char *const *)rv.bytes, rv.lens, rv.special, rv.eos,
                                  rv.n_eos, &v, &err))
        die("vocab: %s", err.msg);
    if (mhla_grammar_tokens_create(g, v, &t, &err))
        die("tokens: %s", err.msg);
    mhla_grammar_free(g); /* t holds it */
    for (int p = 0; p < 6; p++)
        walk(t, &rv);
    count_classes(t, &rv);
    mhla_grammar_tokens_free(t);
    mhla_grammar_vocab_free(v);
    rvocab_free(&rv);
    stat.grammars++;
}

/* ---- targeted cases ------------------------------------------------------- */

typedef struct {
    mhla_grammar_vocab *v;
    mhla_grammar_tokens *t;
    mhla_grammar_matcher *m;
} fixture;

/* Binds g to the tokens (NULL-ended list; "<e>" is the end id, "!abc" a
 * special token spelled "abc") and starts a row. */
static void fixture_open(fixture *f, mhla_grammar *g, const char *const *toks)
{
    const char *bytes[32];
    size_t lens[32];
    unsigned char special[32];
    int32_t eos[1] = {-1};
    int n = 0;
    mhla_grammar_error err;
    for (; toks[n]; n++) {
        special[n] = toks[n][0] == '!';
        bytes[n] = toks[n] + special[n];
        lens[n] = strlen(bytes[n]);
        if (strcmp(toks[n], "<e>") == 0)
            eos[0] = n;
    }
    if (mhla_grammar_vocab_create(n, bytes, lens, special, eos, eos[0] >= 0, &f->v, &err) ||
        mhla_grammar_tokens_create(g, f->v, &f->t, &err) ||
        mhla_grammar_matcher_create(f->t, &f->m, &err))
        die("fixture: %s", err.msg);
    mhla_grammar_free(g);
}

static void fixture_close(fixture *f)
{
    mhla_grammar_matcher_free(f->m);
    mhla_grammar_tokens_free(f->t);
    mhla_grammar_vocab_free(f->v);
}

/* The mask as a string of 0/1 per token, fast and slow agreeing. */
static void mask_string(fixture *f, char *out)
{
    uint64_t fast[WORDS], slow[WORDS];
    mhla_grammar_error err;
    int cf = mhla_grammar_matcher_mask(f->m, fast, &err);
    int cs = mhla_grammar_matcher_mask_slow(f->m, slow, &err);
    CHECK(cf >= 0 && cf == cs, "fast %d slow %d", cf, cs);
    int n = mhla_grammar_vocab_size(f->v);
    for (int i = 0; i < n; i++)
        out[i] = (char)('0' + (fast[i >> 6] >> (i & 63) & 1));
    out[n] = 0;
    CHECK(memcmp(fast, slow, (size_t)(n + 63) / 64 * 8) == 0, "fast and slow differ");
}

/* root ::= a "x";  a ::= "ab". "ab" ends exactly at a's end (accepted at a's
 * first element), "abx" runs past it (uncertain, allowed here), "abxy" too
 * (uncertain, refused), "b" is refused. */
static void case_rule_end(void)
{
    ir b;
    ir_init(&b);
    ir_rule(&b);
    ir_ref(&b, 1);
    ir_lit(&b, "x");
    ir_end(&b);
    ir_rule(&b);
    ir_lit(&b, "ab");
    ir_end(&b);
    static const char *const toks[] = {"ab", "abx", "abxy", "a", "b", "x", NULL};
    fixture f;
    char got[32];
    fixture_open(&f, ir_finish(&b, 0), toks);
    mask_string(&f, got);
    CHECK(strcmp(got, "110100") == 0, "rule end: mask %s, want 110100", got);
    const gr_top_tokens *tt = f.t->by_elem[f.m->stacks.s[0].pos[f.m->stacks.s[0].n - 1]];
    CHECK(tt && (tt->accepted[0] & 0x3F) == 0x09, "rule end: accepted %llx, want ab and a",
          tt ? (unsigned long long)tt->accepted[0] : 0ull);
    CHECK(tt && tt->n_uncertain == 2, "rule end: %u uncertain, want abx and abxy",
          tt ? tt->n_uncertain : 0);
    fixture_close(&f);
}

/* root ::= "a" "b"?  End id only once "a" is in, and alone after it. */
static void case_end_id(void)
{
    ir b;
    ir_init(&b);
    ir_rule(&b);
    ir_lit(&b, "a");
    ir_ref(&b, 1);
    ir_end(&b);
    ir_rule(&b);
    ir_lit(&b, "b");
    ir_alt(&b);
    ir_end(&b);
    static const char *const toks[] = {"a", "b", "<e>", "ab", NULL};
    fixture f;
    char got[32];
    mhla_grammar_error err;
    fixture_open(&f, ir_finish(&b, 0), toks);
    mask_string(&f, got);
    CHECK(strcmp(got, "1001") == 0 && !mhla_grammar_matcher_done(f.m), "start: %s", got);
    CHECK(mhla_grammar_matcher_accept(f.m, 2, &err) == MHLA_GRAMMAR_REJECTED, "early end id");
    CHECK(mhla_grammar_matcher_accept(f.m, 0, &err) == 0, "a: %s", err.msg);
    mask_string(&f, got);
    CHECK(strcmp(got, "0110") == 0 && mhla_grammar_matcher_done(f.m), "after a: %s", got);
    CHECK(mhla_grammar_matcher_accept(f.m, 2, &err) == 0, "end id: %s", err.msg);
    mask_string(&f, got);
    CHECK(strcmp(got, "0010") == 0 && mhla_grammar_matcher_done(f.m), "after end: %s", got);
    CHECK(mhla_grammar_matcher_accept(f.m, 1, &err) == MHLA_GRAMMAR_REJECTED, "b after the end");
    fixture_close(&f);
}

/* root ::= [a-z]*  A special token spelled "abc" is never allowed. */
static void case_special(void)
{
    ir b;
    ir_init(&b);
    ir_rule(&b);
    ir_range(&b, 'a', 'z');
    ir_ref(&b, 0);
    ir_alt(&b);
    ir_end(&b);
    static const char *const toks[] = {"!abc", "abc", "z", NULL};
    fixture f;
    char got[32];
    mhla_grammar_error err;
    fixture_open(&f, ir_finish(&b, 0), toks);
    mask_string(&f, got);
    CHECK(strcmp(got, "011") == 0, "special: %s", got);
    CHECK(mhla_grammar_matcher_accept(f.m, 0, &err) == MHLA_GRAMMAR_REJECTED, "special taken");
    fixture_close(&f);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    case_rule_end();
    case_end_id();
    case_special();
    for (int i = 0; i < n; i++)
        random_case(i);
    printf("mask_exact: %ld grammars, %ld prefixes, %ld steps, %ld tokens compared (%ld allowed), "
           "%ld walks stopped at a cap\n",
           stat.grammars, stat.prefixes, stat.steps, stat.compared, stat.allowed, stat.skipped);
    printf("classes: %ld tops, %ld token classifications, %ld uncertain (%.2f%%); %ld suffix "
           "classes\n",
           stat.tops, stat.top_tokens, stat.uncertain,
           stat.top_tokens ? 100.0 * (double)stat.uncertain / (double)stat.top_tokens : 0.0,
           stat.deep);
    printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
