/* The reducer: delta debugging over the generator's structure (gen.h).
 *
 * Each round tries, in order, edits that make the program smaller: drop a store or an
 * atomic, turn a loop into its initial value or one trip, drop a mask, replace an
 * expression by one of its operands of the same type or by a constant, inline a let,
 * simplify literals, halve the tile sizes, shrink the grid and the warps. An edit is kept when the program
 * stays valid (dt_analyze: no UB, no discontinuity on inexact values) and the oracle
 * says it still fails the same way. Rounds repeat until one keeps nothing. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

typedef struct Reducer {
    DtProgram *best, *cand;
    DtOracle still_fails;
    void *ud;
    int tests, max_tests;
    double deadline;
} Reducer;

double dt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool out_of_budget(const Reducer *r) { return r->tests >= r->max_tests || dt_now_s() > r->deadline; }

static void start(Reducer *r) { memcpy(r->cand, r->best, sizeof *r->best); }

/* Keeps the candidate if it is valid and still fails. */
static bool try_cand(Reducer *r)
{
    if (out_of_budget(r) || !dt_analyze(r->cand)) return false;
    r->tests++;
    if (!r->still_fails(r->cand, r->ud)) return false;
    memcpy(r->best, r->cand, sizeof *r->best);
    return true;
}

/* ---- statements ------------------------------------------------------------------------ */
static bool is_output(const DtStmt *s) { return !s->dead && (s->kind == DT_STORE || s->kind == DT_ATOMIC); }

static bool drop_outputs(Reducer *r)
{
    bool progress = false;
    for (int i = 0; i < r->best->nstmts; i++) {
        int outputs = 0;
        for (int j = 0; j < r->best->nstmts; j++) outputs += is_output(&r->best->stmts[j]);
        if (!is_output(&r->best->stmts[i]) || outputs < 2) continue;
        start(r);
        r->cand->stmts[i].dead = true;
        progress |= try_cand(r);
    }
    return progress;
}

static bool simplify_loops(Reducer *r)
{
    bool progress = false;
    for (int i = 0; i < r->best->nstmts; i++) {
        if (r->best->stmts[i].kind != DT_FOR) continue;
        start(r);
        r->cand->stmts[i].kind = DT_LET;
        if (try_cand(r)) {
            progress = true;
            continue;
        }
        if (r->best->stmts[i].trips == 1) continue;
        start(r);
        r->cand->stmts[i].trips = 1;
        progress |= try_cand(r);
    }
    return progress;
}

static bool drop_masks(Reducer *r)
{
    bool progress = false;
    for (int i = 0; i < r->best->nstmts; i++) {
        if (r->best->stmts[i].mask < 0) continue;
        start(r);
        r->cand->stmts[i].mask = -1;
        progress |= try_cand(r);
    }
    for (int n = 0; n < r->best->nnodes; n++) {
        if (dt_forms[r->best->nodes[n].form].kind != K_LOAD || r->best->nodes[n].nkids < 2) continue;
        start(r);
        r->cand->nodes[n].nkids = 1;
        r->cand->nodes[n].j = 0;
        progress |= try_cand(r);
    }
    return progress;
}

/* ---- expressions ----------------------------------------------------------------------- */
static bool same_type(DtType a, DtType b)
{
    if (a.elem != b.elem || a.rank != b.rank) return false;
    for (int k = 0; k < a.rank; k++)
        if (a.shape[k] != b.shape[k]) return false;
    return true;
}

/* The live nodes, parents before kids (big subtrees are tried first). */
static void collect(const DtProgram *p, int n, bool *seen, int *out, int *nout)
{
    if (n < 0 || seen[n]) return;
    seen[n] = true;
    out[(*nout)++] = n;
    for (int k = 0; k < p->nodes[n].nkids; k++) collect(p, p->nodes[n].kid[k], seen, out, nout);
}

static int live_nodes(const DtProgram *p, int *out)
{
    bool live[DT_MAX_STMTS], live_buf[DT_MAX_BUFS], seen[DT_MAX_NODES] = {0};
    dt_live(p, live, live_buf);
    int n = 0;
    for (int i = 0; i < p->nstmts; i++) {
        if (!live[i]) continue;
        const DtStmt *s = &p->stmts[i];
        collect(p, s->node, seen, out, &n);
        if (s->kind == DT_FOR) collect(p, s->body, seen, out, &n);
        collect(p, s->mask, seen, out, &n);
        collect(p, s->offs, seen, out, &n);
    }
    return n;
}

static void make_const(DtNode *x, double v)
{
    x->form = dt_form_find(K_CONST, NULL);
    x->nkids = 0;
    x->j = 0;   /* a scalar written (v as T), whatever j meant for the old form */
    x->f = v;
}

/* Replaces node n by a kid of its type, by a constant, or (a reference) by the let's
 * expression. */
static bool shrink_node(Reducer *r, int n)
{
    const DtNode *x = &r->best->nodes[n];
    int kind = dt_forms[x->form].kind;
    for (int k = 0; k < x->nkids; k++) {
        if (!same_type(r->best->nodes[x->kid[k]].t, x->t)) continue;
        start(r);
        r->cand->nodes[n] = r->cand->nodes[x->kid[k]];
        if (try_cand(r)) return true;
    }
    if (kind == K_REF && r->best->stmts[x->i].kind == DT_LET) {
        start(r);
        r->cand->nodes[n] = r->cand->nodes[r->best->stmts[x->i].node];
        if (try_cand(r)) return true;
    }
    if (kind == K_CONST || kind == K_LIT) return false;
    for (int v = 0; v < 2; v++) {
        start(r);
        make_const(&r->cand->nodes[n], v);
        if (try_cand(r)) return true;
    }
    return false;
}

static bool shrink_nodes(Reducer *r)
{
    int order[DT_MAX_NODES], n = live_nodes(r->best, order);
    bool progress = false;
    for (int i = 0; i < n && !out_of_budget(r); i++) progress |= shrink_node(r, order[i]);
    return progress;
}

static bool simplify_literals(Reducer *r)
{
    bool progress = false;
    for (int n = 0; n < r->best->nnodes; n++) {
        int kind = dt_forms[r->best->nodes[n].form].kind;
        double v = r->best->nodes[n].f;
        if ((kind != K_CONST && kind != K_LIT) || v == 0 || v == 1) continue;
        for (int w = 0; w < 2; w++) {
            start(r);
            r->cand->nodes[n].f = w;
            if (try_cand(r)) {
                progress = true;
                break;
            }
        }
    }
    return progress;
}

/* Halves every size S of every tile at once (S = 4096 down to 2). A candidate whose
 * shapes no longer fit together (a reshape, a dot) does not compile, and the oracle
 * rejects it like any other that stops failing. */
static bool shrink_sizes(Reducer *r)
{
    bool progress = false;
    for (int size = 4096; size >= 2; size /= 2) {
        bool seen = false;
        start(r);
        for (int n = 0; n < r->cand->nnodes; n++)
            for (int k = 0; k < r->cand->nodes[n].t.rank; k++)
                if (r->cand->nodes[n].t.shape[k] == size) r->cand->nodes[n].t.shape[k] = size / 2, seen = true;
        if (seen) progress |= try_cand(r);
    }
    return progress;
}

/* ---- launch ------------------------------------------------------------------------------ */
static bool shrink_launch(Reducer *r)
{
    bool progress = false;
    for (int d = 0; d < 3; d++) {
        if (r->best->grid[d] == 1) continue;
        start(r);
        r->cand->grid[d] = 1;
        progress |= try_cand(r);
    }
    while (r->best->ngrid > 1 && r->best->grid[r->best->ngrid - 1] == 1) {
        start(r);
        r->cand->ngrid--;
        if (!try_cand(r)) break;
        progress = true;
    }
    static const int warps[] = {1, 4};
    for (int w = 0; w < 2 && r->best->warps != 1; w++) {
        if (warps[w] >= r->best->warps) continue;
        start(r);
        r->cand->warps = warps[w];
        if (try_cand(r)) return true;
    }
    return progress;
}

int dt_reduce(DtProgram *p, DtOracle still_fails, void *ud, int max_tests, double max_seconds)
{
    Reducer r = {p, malloc(sizeof *p), still_fails, ud, 0, max_tests, dt_now_s() + max_seconds};
    if (!r.cand) abort();
    for (bool progress = true; progress && !out_of_budget(&r);) {
        progress = drop_outputs(&r);
        progress |= simplify_loops(&r);
        progress |= drop_masks(&r);
        progress |= shrink_nodes(&r);
        progress |= simplify_literals(&r);
        progress |= shrink_sizes(&r);
        progress |= shrink_launch(&r);
    }
    free(r.cand);
    dt_analyze(p);
    return r.tests;
}
