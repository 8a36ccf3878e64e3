/* PTX rewrites that steer around ptxas bugs, applied to LLVM's PTX text. Each one is a
 * textual peephole with the bug it avoids, the SASS that showed it and a test.
 *
 * neg.s16: ptxas 13.0 keeps 16-bit values sign-extended in 32-bit registers and takes
 * the negation of one as still sign-extended, so -(-32768), which wraps to -32768 in
 * 16 bits, compares as +32768 (SASS: PRMT 0x9910 sign extension, then IMAD.MOV -R0 and
 * a 32-bit ISETP; the differential tester's tests/difftest/regressions/ptxas-neg16-*).
 * Written as not + add, the sign extension follows the arithmetic (LOP3, VIADD, PRMT)
 * and the value is right. LLVM makes neg.s16 of its own (x * -16384 is -(x << 14)),
 * so the rewrite works on the PTX, not on the IR. */
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

char *cg_ptx_workarounds(char *ptx)
{
    size_t len = strlen(ptx), cap = len + len / 4 + 64, w = 0;
    char *out = tl_malloc(cap);
    if (!out) tl_oom();
    for (const char *p = ptx; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (w + 2 * n + 64 > cap) {
            cap = 2 * cap + 2 * n + 64;
            out = tl_realloc(out, cap);
            if (!out) tl_oom();
        }
        size_t r = rewrite_neg16(p, n, out + w);
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
