/* Specialization: rewrites a kernel for the classes of its run-time arguments.
 *
 * Requires: a verified kernel. Guarantees: verified IR that computes the same results
 * for every argument set of the given classes (the runtime checks the classes per
 * launch, so a variant never runs on arguments outside its class).
 *
 *   kernel @k(%p: *f32, %n: i32, %s: i32)     classes {ALIGN16, DIV16, ONE}
 *     %a = mul %pid, %s                 ->      %n.h = multiple_of 16 %n
 *     %m = cmp lt %o, %n                        %one = const 1 : i32
 *                                               %a = mul %pid, %one
 *                                               %m = cmp lt %o, %n.h
 * Later cleanup (fold) turns `mul %pid, 1` into %pid; the hint feeds the axis analysis,
 * which proves masks constant over 16 lanes and addresses aligned. A parameter of class
 * DIV8 gets `multiple_of 8`: every consumer reasons in bytes (a bf16 row stride that is
 * a multiple of 8 elements is 16 bytes, enough for TMA and 16-byte vectors), so no
 * consumer needs the class itself. Pointer alignment cannot be written in the IR; it
 * is returned as a bit set for the code generator. */
#include "passes/specialize.h"

SpecClass spec_class_int(int64_t v)
{
    if (v == 1) return SPEC_ONE;
    return v % 16 == 0 ? SPEC_DIV16 : v % 8 == 0 ? SPEC_DIV8 : SPEC_NONE;
}

SpecClass spec_class_ptr(uint64_t address) { return address % 16 == 0 ? SPEC_ALIGN16 : SPEC_NONE; }

/* Puts `op` (built at the end of the body) first in the body. */
static void move_to_front(IrFunc *f, IrOp *op)
{
    if (f->body.first == op) return;
    ir_op_remove(op);
    ir_op_insert_before(op, f->body.first);
}

/* Every use of parameter p now reads the value built by `make`. */
static void replace_param(IrFunc *f, IrValue p, IrOp *op)
{
    move_to_front(f, op);
    ir_replace_all_uses(f, p, op->results[0]);
    for (uint32_t i = 0; i < op->noperands; i++) op->operands[i] = p;   /* the hint reads p */
}

/* What an integer of the class is a multiple of, for its hint; 0 for no hint. */
static int64_t divisor_of(SpecClass c) { return c == SPEC_DIV16 ? 16 : c == SPEC_DIV8 ? 8 : 0; }

uint64_t pass_specialize(IrFunc *f, const SpecClass *classes)
{
    uint64_t aligned = 0;
    IrBuilder b = {0};
    for (uint32_t i = 0; i < f->body.nargs; i++) {
        IrValue p = f->body.args[i];
        const IrType *t = ir_value_type(f, p);
        ir_builder_at_end(&b, &f->body);
        b.loc = f->loc;
        if (t->elem == IR_PTR) {
            if (classes[i] == SPEC_ALIGN16 && i < 64) aligned |= UINT64_C(1) << i;
        } else if (ir_elem_is_int(t->elem) && t->elem != IR_I1 && classes[i] == SPEC_ONE) {
            ir_const_int(&b, t, 1);
            replace_param(f, p, f->body.last);
        } else if (ir_elem_is_int(t->elem) && t->elem != IR_I1 && divisor_of(classes[i])) {
            IrOp *h = ir_build(&b, IR_OP_MULTIPLE_OF, &p, 1, &t, 1, 0);
            h->attr.i = divisor_of(classes[i]);
            replace_param(f, p, h);
        }
    }
    f->aligned_params = aligned;
    return aligned;
}

void spec_classes_of_args(const IrFunc *f, const InterpArg *args, SpecClass *out)
{
    for (uint32_t p = 0; p < f->body.nargs; p++) {
        IrElem e = ir_value_type(f, f->body.args[p])->elem;
        out[p] = args[p].is_buffer ? SPEC_ALIGN16 : ir_elem_is_int(e) ? spec_class_int(args[p].u.i) : SPEC_NONE;
    }
}

uint64_t pass_prepare_gpu(IrFunc *f, const SpecClass *classes, const PassOptions *opt)
{
    uint64_t aligned = pass_specialize(f, classes);   /* == 1 becomes 1, % 16 or % 8 a hint */
    pass_run_default(f->module, 3, opt);
    pass_run_gpu(f->module, opt);
    return aligned;
}
