/* PTX rewrites that steer around ptxas bugs, applied to LLVM's PTX text. Each one is a
 * textual peephole with the bug it avoids, the SASS that showed it and a test.
 *
 * neg.s16: ptxas 13.0 keeps 16-bit values sign-extended in 32-bit registers and takes
 * the negation of one as still sign-extended, so -(-32768), which wraps to -32768 in
 * 16 bits, compares as +32768 (SASS: PRMT 0x9910 sign extension, then IMAD.MOV -R0 and
 * a 32-bit ISETP; the differential tester's tests/difftest/regressions/ptxas-neg16-*).
 * Written as not + add, the sign extension follows the arithmetic (LOP3, VIADD, PRMT)
 * and the value is right. LLVM makes neg.s16 of its own (x * -16384 is -(x << 14)),
 * so the rewrite works on the PTX, not on the IR.
 *
 * abs.s16: the same bug: abs(-32768) wraps to -32768 in 16 bits, but ptxas computes it
 * on the sign-extended word (+32768) and a later cvt.s32.s16 keeps that, so
 * max(abs(x), 0) of -32768 gave -32768 where 0 is right (the differential tester's
 * seed 5903; tests/difftest/regressions/ptxas-abs16.tile). Written as the not + add
 * negation above and a select on the sign.
 *
 * mul.hi.u32: ptxas 13.0 folds zext(mul.hi.u32(a, b)) - zext(y) into IMAD.HI with the
 * 64-bit addend (-y, -1), whose high word is wrong when y = 0 (0 - 0 gave -2^32:
 * seed 14865, umulhi on i64; tests/difftest/regressions/ptxas-mulhi-sub.tile). The sub
 * written as sub.cc/subc or neg + add folds the same way; a mul.wide.u32 whose high
 * word is taken does not (checked on the H200 with hand-written PTX). */
#include <string.h>

#include "codegen/cg_internal.h"

/* "\tneg.s16 \t%rsD, %rsS;" -> "\tnot.b16 \t%rsD, %rsS;\n\tadd.s16 \t%rsD, %rsD, 1;" */
static size_t rewrite_neg16(const char *line, size_t n, char *out)
{
    static const char op[] = "\tneg.s16 \t";
    const size_t k = sizeof op - 1;
    const char *comma = n > k ? memchr(line + k, ',', n - k) : NULL;
    if (n <= k || memcmp(line, op, k) || !comma) return 0;
    size_t dl = (size_t)(comma - (line + k)), sl = n - (size_t)(comma + 2 - line) - 1;   /* src without ';' */
    size_t w = 0;
    w += (size_t)sprintf(out + w, "\tnot.b16 \t%.*s, %.*s;\n", (int)dl, line + k, (int)sl, comma + 2);
    w += (size_t)sprintf(out + w, "\tadd.s16 \t%.*s, %.*s, 1;", (int)dl, line + k, (int)dl, line + k);
    return w;
}

/* A line "\tOP \tD, S;" or "\tOP \tD, S, T;" with OP the given opcode: its operands
 * (without the ';') in d, s and t (t empty for two). */
typedef struct Ops {
    const char *d, *s, *t;
    int dl, sl, tl;
} Ops;

static bool parse_ops(const char *line, size_t n, const char *opcode, int nops, Ops *o)
{
    size_t k = strlen(opcode);
    if (n < k + 4 || line[0] != '\t' || memcmp(line + 1, opcode, k) || line[k + 1] != ' ' || line[k + 2] != '\t' ||
        line[n - 1] != ';')
        return false;
    const char *p = line + k + 3, *end = line + n - 1;
    const char *c1 = memchr(p, ',', (size_t)(end - p));
    if (!c1 || c1 + 2 > end) return false;
    const char *c2 = memchr(c1 + 1, ',', (size_t)(end - c1 - 1));
    if ((nops == 2) != (c2 == NULL) || (c2 && c2 + 2 > end)) return false;
    o->d = p, o->dl = (int)(c1 - p);
    o->s = c1 + 2, o->sl = (int)((c2 ? c2 : end) - (c1 + 2));
    o->t = c2 ? c2 + 2 : end, o->tl = c2 ? (int)(end - (c2 + 2)) : 0;
    return true;
}

/* "\tabs.s16 \tD, S;" -> -S by not + add, then D = S < 0 ? -S : S */
static size_t rewrite_abs16(const char *line, size_t n, char *out)
{
    Ops o;
    if (!parse_ops(line, n, "abs.s16", 2, &o)) return 0;
    return (size_t)sprintf(out, "\t{ .reg .b16 tn; .reg .pred tp; not.b16 tn, %.*s; add.s16 tn, tn, 1; "
                                "setp.lt.s16 tp, %.*s, 0; selp.b16 %.*s, tn, %.*s, tp; }",
                           o.sl, o.s, o.sl, o.s, o.dl, o.d, o.sl, o.s);
}

/* "\tmul.hi.u32 \tD, A, B;" -> the high word of mul.wide.u32 */
static size_t rewrite_mulhi(const char *line, size_t n, char *out)
{
    Ops o;
    if (!parse_ops(line, n, "mul.hi.u32", 3, &o)) return 0;
    return (size_t)sprintf(out, "\t{ .reg .b64 tw; .reg .b32 tlo; mul.wide.u32 tw, %.*s, %.*s; mov.b64 {tlo, %.*s}, tw; }",
                           o.sl, o.s, o.tl, o.t, o.dl, o.d);
}

char *cg_ptx_workarounds(char *ptx)
{
    size_t len = strlen(ptx), cap = len + len / 4 + 64, w = 0;
    char *out = tl_malloc(cap);
    if (!out) tl_oom();
    for (const char *p = ptx; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (w + 4 * n + 256 > cap) {
            cap = 2 * cap + 4 * n + 256;
            out = tl_realloc(out, cap);
            if (!out) tl_oom();
        }
        size_t r = rewrite_neg16(p, n, out + w);
        if (!r) r = rewrite_abs16(p, n, out + w);
        if (!r) r = rewrite_mulhi(p, n, out + w);
        if (r) w += r;
        else {
            memcpy(out + w, p, n);
            w += n;
        }
        if (nl) out[w++] = '\n';
        p = nl ? nl + 1 : p + n;
    }
    out[w] = 0;
    tl_free(ptx);
    return out;
}
