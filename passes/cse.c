/* Common subexpression elimination over the region tree.
 *
 * require:    verified IR
 * guarantees: no pure op without regions has an identical twin (same opcode,
 *             attribute, operands and result types) among the ops that dominate it
 *
 *   %a = add %x, %y : i32                 %a = add %x, %y : i32
 *   for ... {                       ->    for ... {
 *     %b = add %x, %y : i32                 (uses of %b now use %a)
 *
 * A scoped hash table follows the regions: an op of an enclosing block is visible in
 * nested regions, never the other way, and ops of sibling regions never see each
 * other. Only pure ops (IR_P) are merged: loads, stores, atomics, assert and print
 * read or change state, so two of them are never the same computation. */
#include "passes.h"

#include <string.h>

typedef struct Entry {
    IrOp *op;
    uint32_t hash;
    int32_t next;                /* the entry it shadows in its bucket, or -1 */
} Entry;

typedef struct Table {
    const IrFunc *f;
    int32_t *heads;              /* nbuckets, a power of two above twice the values */
    uint32_t mask;
    VEC(Entry) entries;          /* a stack: leaving a scope pops its entries */
    IrValue *forward;            /* a merged op's result -> its twin's (else itself) */
} Table;

static uint32_t mix(uint32_t h, uint64_t x) { return (h ^ (uint32_t)x ^ (uint32_t)(x >> 32)) * 16777619u; }

static uint64_t float_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

static uint32_t op_hash(const Table *t, const IrOp *op)
{
    uint32_t h = mix(2166136261u, op->code);
    h = mix(h, (uint64_t)op->attr.i);
    h = mix(h, float_bits(op->attr.f));
    for (uint32_t i = 0; i < op->noperands; i++) h = mix(h, op->operands[i]);
    for (uint32_t i = 0; i < op->nresults; i++) h = mix(h, (uint64_t)(uintptr_t)ir_value_type(t->f, op->results[i]));
    return h;
}

/* Floats compare by bits: 0.0 and -0.0 are different constants, a NaN equals itself. */
static bool same_op(const Table *t, const IrOp *a, const IrOp *b)
{
    if (a->code != b->code || a->attr.i != b->attr.i || float_bits(a->attr.f) != float_bits(b->attr.f) ||
        a->noperands != b->noperands || a->nresults != b->nresults)
        return false;
    if (memcmp(a->operands, b->operands, a->noperands * sizeof *a->operands)) return false;
    for (uint32_t i = 0; i < a->nresults; i++)
        if (ir_value_type(t->f, a->results[i]) != ir_value_type(t->f, b->results[i])) return false;
    return true;
}

/* The bucket of a hash: its bits mixed (murmur3's finalizer), since the FNV-style
 * hash keeps the low bits of small operands and constants. */
static uint32_t bucket(const Table *t, uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h & t->mask;
}

static IrOp *lookup(const Table *t, const IrOp *op, uint32_t h)
{
    for (int32_t e = t->heads[bucket(t, h)]; e >= 0; e = t->entries.data[e].next)
        if (t->entries.data[e].hash == h && same_op(t, t->entries.data[e].op, op)) return t->entries.data[e].op;
    return NULL;
}

static void push(Table *t, IrOp *op, uint32_t h)
{
    Entry e = {op, h, t->heads[bucket(t, h)]};
    vec_push(&t->entries, e);
    t->heads[bucket(t, h)] = (int32_t)(t->entries.len - 1);
}

static void pop_to(Table *t, size_t len)
{
    while (t->entries.len > len) {
        Entry *e = &t->entries.data[--t->entries.len];
        t->heads[bucket(t, e->hash)] = e->next;
    }
}

static bool mergeable(const IrOp *op)
{
    return (ir_op_info[op->code].flags & IR_P) && !op->nregions && op->nresults > 0;
}

/* Uses of merged results are rewritten as the walk reaches them (every use comes
 * after its definition in walk order), not by a walk of the whole function per merge,
 * which made the pass quadratic. */
static void forward_operands(const Table *t, IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (op->operands[i] < t->f->nvalues) op->operands[i] = t->forward[op->operands[i]];
}

static bool cse_block(Table *t, IrFunc *f, IrBlock *blk)
{
    bool changed = false;
    size_t mark = t->entries.len;
    for (IrOp *op = blk->first, *next; op; op = next) {
        next = op->next;
        forward_operands(t, op);
        for (uint32_t r = 0; r < op->nregions; r++) changed |= cse_block(t, f, &op->regions[r]);
        if (!mergeable(op)) continue;
        uint32_t h = op_hash(t, op);
        IrOp *twin = lookup(t, op, h);
        if (!twin) {
            push(t, op, h);
            continue;
        }
        for (uint32_t i = 0; i < op->nresults; i++) t->forward[op->results[i]] = twin->results[i];
        ir_op_remove(op);
        changed = true;
    }
    pop_to(t, mark);
    return changed;
}

bool pass_cse(IrFunc *f)
{
    Table t;
    t.f = f;
    size_t n = 1024;
    while (n < 2 * (size_t)f->nvalues) n *= 2;
    t.mask = (uint32_t)(n - 1);
    t.heads = tl_malloc(n * sizeof *t.heads);
    if (!t.heads) tl_oom();
    memset(t.heads, 0xff, n * sizeof *t.heads);
    t.entries.data = NULL;
    t.entries.len = t.entries.cap = 0;
    t.forward = tl_malloc((f->nvalues + 1) * sizeof *t.forward);
    if (!t.forward) tl_oom();
    for (uint32_t v = 0; v <= f->nvalues; v++) t.forward[v] = v;
    bool changed = cse_block(&t, f, &f->body);
    vec_free(&t.entries);
    tl_free(t.forward);
    tl_free(t.heads);
    return changed;
}
