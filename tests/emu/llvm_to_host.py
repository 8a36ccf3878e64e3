"""Rewrites the LLVM IR of a tile kernel (tilec --emit=llvm) so that it runs on the host:
each inline-asm instruction becomes a function that checks the addresses it is given
(cp.async, TMA's bulk tensor copies and stores and mbarriers, ldmatrix, predicated global stores) and returns zeros (mma passes its
accumulator through), the thread and block indices and the barrier call the harness
(harness.c, one pthread per GPU thread), and every shared-memory load and store is
preceded by a check of its address. Values are not computed; addresses are, exactly as
the kernel computes them.

    python3 llvm_to_host.py kernel.ll host.ll [--values]

With --emu (the mock driver's MOCKCUDA_EMULATE=1, tests/emu/emu_rt.c), every instruction
computes what the GPU's would, through the emulated GPU of emu_rt.c (wgmma, TMA,
mbarriers, cp.async, shuffles, conversions), and each kernel gets an entry
`emu_entry_NAME(void **params)` taking the driver's kernel parameters; an instruction
the emulator does not model fails the translation with its text.

With --values (values.sh), values are computed too: setp/selp pairs compare as
written, predicated global stores store, and warp shuffles go through the harness
(values_harness.c), which exchanges them between the threads of a warp.
"""
import re, sys
EMU = "--emu" in sys.argv[3:]
VALUES = "--values" in sys.argv[3:] or EMU
src = open(sys.argv[1]).read()
out = []
decls = {}
n = [0]
def emu_for(asm, cons, args, ret):
    key = (asm, ret, args)
    if key in decls: return decls[key][0]
    name = "emu_%d" % len(decls)
    argtypes = [a.strip().split()[0] for a in split_args(args)] if args.strip() else []
    params = ", ".join("%s %%p%d" % (t, i) for i, t in enumerate(argtypes))
    body = emu_body(asm, cons, argtypes, ret) if EMU else []
    if body:
        decls[key] = (name, "define internal %s @%s(%s) {\n%s\n}\n" % (ret, name, params, "\n".join(body)))
        return name
    if "ldmatrix" in asm:
        body = ["  call void @chk_ldm(i32 %p0)", "  ret %s zeroinitializer" % ret]
    elif asm.startswith("mma.sync"):
        # pass the accumulator through
        k = len(argtypes)
        acc = ["%%p%d" % i for i in range(k - 4, k)]
        cur = "undef"
        lines = []
        for i, a in enumerate(acc):
            lines.append("  %%s%d = insertvalue %s %s, %s %s, %d" % (i, ret, cur, argtypes[k - 4 + i], a, i))
            cur = "%%s%d" % i
        body = lines + ["  ret %s %s" % (ret, cur)]
    elif "wgmma.mma_async" in asm:
        # check what the descriptors address; pass the accumulators through
        N = int(re.search(r"m64n(\d+)k16", asm).group(1))
        R = N // 2
        regs = re.search(r"\}, \{\$", asm) is not None           # A from 4 registers
        flags = re.search(r"p, 1, 1, (\d)(?:, (\d))?; \}$", asm)
        ta, tb = (0, int(flags.group(1))) if regs else (int(flags.group(1)), int(flags.group(2)))
        da = "i64 0" if regs else "i64 %p0"
        db = "i64 %%p%d" % (4 if regs else 1)
        k = len(argtypes)
        lines = ["  call void @chk_wgmma(%s, %s, i32 %d, i32 %d, i32 %d)" % (da, db, N, ta, tb)]
        cur = "undef"
        for i in range(R):
            lines.append("  %%s%d = insertvalue %s %s, float %%p%d, %d" % (i, ret, cur, k - R + i, i))
            cur = "%%s%d" % i
        body = lines + ["  ret %s %s" % (ret, cur)]
    elif asm.startswith("wgmma.wait_group") or asm.startswith("wgmma.fence") or asm == "":
        # (the empty one: a loop's constant initial accumulator held in registers,
        # codegen/cg_wgmma.c cg_wgmma_hold)
        if ret == "void":
            body = ["  ret void"]
        else:   # the values passed through it
            cur = "undef"
            lines = []
            for i, t in enumerate(argtypes):
                lines.append("  %%s%d = insertvalue %s %s, %s %%p%d, %d" % (i, ret, cur, t, i, i))
                cur = "%%s%d" % i
            body = lines + ["  ret %s %s" % (ret, cur)]
    elif asm.startswith("wgmma.commit_group") or asm.startswith("fence.proxy.async") or asm.startswith("setmaxnreg"):
        body = ["  ret void"]
    elif asm in ("bar.sync $0, 256;", "bar.arrive $0, 256;"):   # the warpgroups' turns (named barrier $0)
        body = ["  call void @emu_bar_%s(i32 %%p0, i32 256)" % ("sync" if "sync" in asm else "arrive"), "  ret void"]
    elif re.match(r"bar\.(sync|arrive) \d+, 256;$", asm):   # the same, the barrier by number
        m = re.match(r"bar\.(sync|arrive) (\d+), 256;$", asm)
        body = ["  call void @emu_bar_%s(i32 %s, i32 256)" % (m.group(1), m.group(2)), "  ret void"]
    elif asm.startswith("barrier.cluster.arrive"):   # arrive (a leaving producer's) or arrive and wait
        body = ["  call void @emu_cluster_barrier()", "  ret void"]
    elif "cvt.rn.bf16x2" in asm:
        body = ["  ret i32 0"]
    elif "cvt.rn.satfinite.e4m3x2" in asm:
        body = ["  ret i16 0"]
    elif VALUES and re.match(r"\{ \.reg \.pred p; setp\.(gt|lt|ge|le)\.([su])32 p, \$1, \$2; selp\.b32 \$0, \$1, \$2, p; \}$", asm):
        m = re.match(r"\{ \.reg \.pred p; setp\.(gt|lt|ge|le)\.([su])32", asm)
        body = ["  %%c = icmp %s%s i32 %%p0, %%p1" % (m.group(2), m.group(1)),
                "  %r = select i1 %c, i32 %p0, i32 %p1", "  ret i32 %r"]
    elif VALUES and asm == "{ .reg .pred p; setp.ne.b32 p, $0, 0; @p st.global.b32 [$1], $2; }":
        body = ["  %c = icmp ne i32 %p0, 0", "  br i1 %c, label %st, label %done", "st:",
                "  %a = inttoptr i64 %p1 to ptr", "  store i32 %p2, ptr %a", "  br label %done", "done:", "  ret void"]
    elif "selp.b32 $0, $1, $2" in asm:
        body = ["  %c = icmp slt i32 %p0, %p1", "  %r = select i1 %c, i32 %p0, i32 %p1", "  ret i32 %r"]
    elif "cp.async.cg" in asm or "cp.async.ca" in asm:
        m = re.search(r"\], (\d+), \$2;", asm)
        if m:   # zero-filled: source size $2 (bytes or 0), the source p or the zero bytes
            body = ["  %c = icmp ne i32 %p2, 0", "  %g = zext i1 %c to i32",
                    "  call void @chk_cp(i32 %%p0, i64 %%p1, i32 %%g, i32 1, i32 %s)" % m.group(1), "  ret void"]
            decls[key] = (name, "define internal %s @%s(%s) {\n%s\n}\n" % (ret, name, params, "\n".join(body)))
            return name
        sz = re.search(r"\], (\d+);", asm).group(1)
        if len(argtypes) == 3:
            body = ["  call void @chk_cp(i32 %%p0, i64 %%p1, i32 %%p2, i32 1, i32 %s)" % sz, "  ret void"]
        else:
            body = ["  call void @chk_cp(i32 %%p0, i64 %%p1, i32 %%p2, i32 %%p3, i32 %s)" % sz, "  ret void"]
    elif re.match(r"st\.global(?:\.v\d)?\.b32 \[\$0\], ", asm):   # whole words without a mask (cg_memory.c store_run)
        w = int((re.match(r"st\.global\.v(\d)", asm) or [None, 1])[1])
        body = ["  call void @chk_st(i32 1, i64 %%p0, i32 %d)" % (4 * w), "  ret void"]
    elif "st.global.b32" in asm:
        body = ["  call void @chk_st(i32 %p0, i64 %p1, i32 4)", "  ret void"]
    elif asm.startswith("cp.async.commit") or asm.startswith("cp.async.wait"):
        body = ["  ret void"]
    elif asm.startswith("cp.async.bulk.tensor.2d.global.shared"):   # a TMA store: [map, {c0, c1}], [src]
        body = ["  call void @chk_tma_st(i64 %p0, i32 %p1, i32 %p2, i32 %p3)", "  ret void"]
    elif asm.startswith("cp.async.bulk.wait_group") or asm.startswith("cp.async.bulk.commit_group"):
        body = ["  ret void"]
    elif asm.startswith("cp.async.bulk.tensor.2d") and "multicast::cluster" in asm:   # ..., [bar], mask
        body = ["  call void @chk_tma_mc(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4, i16 %p5)", "  ret void"]
    elif asm.startswith("cp.async.bulk.tensor.2d"):   # [dst], [map, {c0, c1}], [bar]
        body = ["  call void @chk_tma(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4)", "  ret void"]
    elif "mapa.shared::cluster" in asm:   # a release on CTA $1's barrier at offset $0
        body = ["  call void @chk_remote_arrive(i32 %p0, i32 %p1)", "  ret void"]
    elif asm.startswith("mbarrier.") or "mbarrier.try_wait" in asm:   # init, arrive(.expect_tx), try_wait
        body = ["  call void @chk_mbar(i32 %p0)", "  ret void"]
    elif asm.startswith("fence.mbarrier_init"):
        body = ["  ret void"]
    elif re.match(r"st\.shared(?:\.v\d)?\.b32 \[\$0\], ", asm):   # local_store's chunks (emu_body stores them)
        body = ["  ret void"]
    else:
        sys.exit("unknown asm: " + asm)
    decls[key] = (name, "define internal %s @%s(%s) {\n%s\n}\n" % (ret, name, params, "\n".join(body)))
    return name
def struct_of(ret, vals, ty):
    """Lines building the struct ret from vals (each of type ty); its name."""
    cur, lines = "undef", []
    for i, v in enumerate(vals):
        lines.append("  %%s%d = insertvalue %s %s, %s %s, %d" % (i, ret, cur, ty, v, i))
        cur = "%%s%d" % i
    return lines, cur
def via_array(n, ty, vals, tag):
    """Lines storing vals into a fresh [n x ty] array %tag."""
    lines = ["  %%%s = alloca [%d x %s], align 16" % (tag, n, ty)]
    for i, v in enumerate(vals):
        lines.append("  %%%s.%d = getelementptr [%d x %s], ptr %%%s, i32 0, i32 %d" % (tag, i, n, ty, tag, i))
        lines.append("  store %s %s, ptr %%%s.%d" % (ty, v, tag, i))
    return lines
def from_array(n, ty, tag):
    lines, vals = [], []
    for i in range(n):
        lines.append("  %%%s.l%d = load %s, ptr %%%s.%d" % (tag, i, ty, tag, i))
        vals.append("%%%s.l%d" % (tag, i))
    return lines, vals
def emu_body(asm, cons, argtypes, ret):
    """The body of the emulated instruction (--emu), or [] where the checking one is also
    the emulating one (no-ops and values passed through)."""
    k = len(argtypes)
    p = ["%%p%d" % i for i in range(k)]
    if "wgmma.mma_async" in asm:
        m = re.search(r"m64n(\d+)k(16|32)\.f32\.(\w+)\.(\w+) ", asm)
        if not m or m.group(3) != m.group(4) or m.group(3) not in ("bf16", "f16", "e4m3", "e5m2"):
            sys.exit("emu: a wgmma the emulator does not model: " + asm[:200])
        N, R = int(m.group(1)), int(m.group(1)) // 2
        typ = ("bf16", "f16", "e4m3", "e5m2").index(m.group(3))
        regs = re.search(r"\}, \{\$", asm) is not None
        tail = re.search(r"p, 1, 1((?:, \d)*); \}$", asm).group(1)
        flags = [int(x) for x in re.findall(r"\d", tail)]
        ta, tb = (0, flags[0] if flags else 0) if regs else ((flags + [0, 0])[0], (flags + [0, 0])[1])
        acc = p[k - R:]
        lines = via_array(R, "float", acc, "acc")
        if regs:
            lines += via_array(4, "i32", p[:4], "ar")
            areg, da = "ptr %ar", "i64 0"
        else:
            areg, da = "ptr null", "i64 %s" % p[k - R - 3]
        lines.append("  call void @emu_wgmma(ptr %%acc, %s, %s, i64 %s, i32 %s, i32 %d, i32 %d, i32 %d, i32 %d)"
                     % (areg, da, p[k - R - 2], p[k - R - 1], N, typ, ta, tb))
        l2, vals = from_array(R, "float", "acc")
        l3, res = struct_of(ret, vals, "float")
        return lines + l2 + l3 + ["  ret %s %s" % (ret, res)]
    m = re.match(r"ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared\.b16 (\{[$0-9, ]*\}|\$0), \[\$\1\];$", asm)
    if m:
        n = int(m.group(1))
        lines = ["  %v = alloca [4 x i32], align 16",
                 "  call void @emu_ldmatrix(i32 %%p0, i32 %d, ptr %%v, i32 %d)" % (1 if m.group(2) else 0, n)]
        lines += ["  %%v.%d = getelementptr [4 x i32], ptr %%v, i32 0, i32 %d" % (i, i) for i in range(n)]
        l2, vals = from_array(n, "i32", "v")
        if n == 1:
            return lines + l2 + ["  ret i32 %s" % vals[0]]
        l3, res = struct_of(ret, vals, "i32")
        return lines + l2 + l3 + ["  ret %s %s" % (ret, res)]
    m = re.match(r"mma\.sync\.aligned\.m16n8k(8|16|32)\.row\.col\.(f32|s32)\.(bf16|f16|tf32|s8|u8)\.\3\.\2 "
                 r"\{\$0, \$1, \$2, \$3\}, \{\$4, \$5, \$6, \$7\}, \{\$8, \$9\}, \{\$10, \$11, \$12, \$13\};$", asm)
    if m:
        ct = "float" if m.group(2) == "f32" else "i32"
        lines = via_array(4, "i32", p[0:4], "a") + via_array(2, "i32", p[4:6], "b") + via_array(4, ct, p[6:10], "c")
        typ = ("bf16", "f16", "tf32", "s8", "u8").index(m.group(3))
        lines.append("  call void @emu_mma(ptr %%a, ptr %%b, ptr %%c, i32 %d)" % typ)
        l2, vals = from_array(4, ct, "c")
        l3, res = struct_of(ret, vals, ct)
        return lines + l2 + l3 + ["  ret %s %s" % (ret, res)]
    if asm == "cvt.rn.f16x2.f32 $0, $1, $2;":
        return ["  %r = call i32 @emu_cvt_f16x2(float %p0, float %p1)", "  ret i32 %r"]
    if re.match(r"fence\.(acq_rel|sc)\.(gpu|sys|cta);$", asm):
        return ["  ret void"]   # the emulator's threads share memory through its locks
    if asm == "barrier.cluster.arrive.release;\\0Abarrier.cluster.wait.acquire;":
        return ["  call void @emu_cluster_sync(i32 1)", "  ret void"]
    if asm == "barrier.cluster.arrive.release;":
        return ["  call void @emu_cluster_sync(i32 0)", "  ret void"]
    if asm.startswith("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                      "[$0], [$1, {$2, $3}], [$4], $5;"):
        return ["  %m = zext i16 %p5 to i32",
                "  call void @emu_tma_load_mc(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4, i32 %m)", "  ret void"]
    if asm.startswith("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                      "[$0], [$1, {$2, $3, $6}], [$4], $5;"):
        return ["  %m = zext i16 %p5 to i32",
                "  call void @emu_tma_load_mc3(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4, i32 %m, i32 %p6)",
                "  ret void"]
    if "mapa.shared::cluster.u32 tile_remote, $0, $1;" in asm and "mbarrier.arrive.shared::cluster.b64 _, [tile_remote]" in asm:
        return ["  call void @emu_mbar_arrive_remote(i32 %p0, i32 %p1)", "  ret void"]
    if asm.startswith("mma.sync") or "ldmatrix" in asm or "multicast::cluster" in asm or "mapa." in asm \
            or asm.startswith("barrier.cluster"):
        sys.exit("emu: not modelled (this cluster, mma.sync or ldmatrix form): " + asm[:120])
    if asm == "cvt.rn.bf16x2.f32 $0, $1, $2;":
        return ["  %r = call i32 @emu_cvt_bf16x2(float %p0, float %p1)", "  ret i32 %r"]
    if asm == "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;":
        return ["  %r = call i16 @emu_cvt_e4m3x2(float %p0, float %p1)", "  ret i16 %r"]
    m = re.match(r"st\.global(?:\.v(\d))?\.b32 \[\$0\], ", asm)
    if m:   # whole words without a mask (codegen/cg_memory.c store_run: packed 16-bit runs)
        n = int(m.group(1) or 1)
        return via_array(n, "i32", p[1:1 + n], "v") + \
            ["  call void @emu_st_global(i32 1, i64 %%p0, ptr %%v, i32 %d)" % n, "  ret void"]
    m = re.match(r"\{ \.reg \.pred p; setp\.ne\.b32 p, \$0, 0; @p st\.global(?:\.v(\d))?\.b32 \[\$1\], ", asm)
    if m:
        n = int(m.group(1) or 1)
        return via_array(n, "i32", p[2:2 + n], "v") + \
            ["  call void @emu_st_global(i32 %%p0, i64 %%p1, ptr %%v, i32 %d)" % n, "  ret void"]
    m = re.match(r"\{ \.reg \.pred p; setp\.ne\.b32 p, \$0, 0; @p red\.global\.add(?:\.v(\d))?\.f32 \[\$1\], ", asm)
    if m:   # codegen/cg_memory.c lower_red_vector: n f32 atomic adds whose old values nothing reads
        n = int(m.group(1) or 1)
        return via_array(n, "float", p[2:2 + n], "v") + \
            ["  call void @emu_red_add_f32(i32 %%p0, i64 %%p1, ptr %%v, i32 %d)" % n, "  ret void"]
    m = re.match(r"\{ \.reg \.pred p; setp\.ne\.b32 p, \$(\d+), 0; @p ld\.global(?:\.v(\d))?\.b32 ", asm)
    if m:
        n = int(m.group(2) or 1)   # args: address, predicate, the n values tied to the outputs
        lines = via_array(n, "i32", p[2:2 + n], "v")
        lines.append("  call void @emu_ld_global(i32 %%p1, i64 %%p0, ptr %%v, i32 %d)" % n)
        l2, vals = from_array(n, "i32", "v")
        if n == 1:
            return lines + l2 + ["  ret i32 %s" % vals[0]]
        l3, res = struct_of(ret, vals, "i32")
        return lines + l2 + l3 + ["  ret %s %s" % (ret, res)]
    m = re.match(r"st\.shared(?:\.v(\d))?\.b32 \[\$0\], ", asm)
    if m:   # codegen/cg_shared.c local_store: n words at a shared address
        n = int(m.group(1) or 1)
        return via_array(n, "i32", p[1:1 + n], "v") + \
            ["  call void @emu_st_shared(i32 %%p0, ptr %%v, i32 %d)" % n, "  ret void"]
    m = re.match(r"cp\.async\.c[ga]\.shared\.global \[\$0\], \[\$1\], (\d+)(, \$2)?;$", asm)
    if m:
        size = m.group(1)
        return ["  call void @emu_cp_async(i32 %%p0, i64 %%p1, i32 %s, i32 %s)" % (size, "%p2" if m.group(2) else size),
                "  ret void"]
    if asm.startswith("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];"):
        return ["  call void @emu_tma_load(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4)", "  ret void"]
    if asm.startswith("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $5}], [$4];"):
        return ["  call void @emu_tma_load3(i32 %p0, i64 %p1, i32 %p2, i32 %p3, i32 %p4, i32 %p5)", "  ret void"]
    if asm == "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [$0, {$1, $2, $3}], [$4];":
        return ["  call void @emu_tma_store3(i64 %p0, i32 %p1, i32 %p2, i32 %p3, i32 %p4)", "  ret void"]
    if asm == "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];":
        return ["  call void @emu_tma_store(i64 %p0, i32 %p1, i32 %p2, i32 %p3)", "  ret void"]
    if asm == "mbarrier.init.shared::cta.b64 [$0], $1;":
        return ["  call void @emu_mbar_init(i32 %p0, i32 %p1)", "  ret void"]
    if asm == "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;":
        return ["  call void @emu_mbar_arrive_tx(i32 %p0, i32 %p1)", "  ret void"]
    if asm == "mbarrier.arrive.shared::cta.b64 _, [$0];":
        return ["  call void @emu_mbar_arrive(i32 %p0)", "  ret void"]
    if "mbarrier.try_wait.parity.shared::cta.b64 tile_p, [$0], $1;" in asm:
        return ["  call void @emu_mbar_wait(i32 %p0, i32 %p1)", "  ret void"]
    if asm.startswith("mbarrier."):
        sys.exit("emu: an mbarrier form the emulator does not model: " + asm)
    return []
def split_args(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({<[": depth += 1
        if ch in ")}>]": depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur); cur = ""
        else: cur += ch
    if cur.strip(): parts.append(cur)
    return parts
# the asm call's arguments may hold constant expressions with parentheses (a shared
# address folded to ptrtoint (...)): they end at the matching parenthesis
pat = re.compile(r'call (\{[^}]*\}|[a-z0-9]+) asm (?:sideeffect )?"((?:[^"\\]|\\.)*)", "((?:[^"\\]|\\.)*)"\(')
pieces, at = [], 0
for m in pat.finditer(src):
    if m.start() < at: continue
    depth, j = 1, m.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(src[j], 0)
        j += 1
    ret, asm, cons = m.groups()
    args = src[m.end():j - 1]
    pieces.append(src[at:m.start()])
    pieces.append("call %s @%s(%s)" % (ret, emu_for(asm, cons, args, ret), args))
    at = j
pieces.append(src[at:])
src = "".join(pieces)
src = re.sub(r'^target (datalayout|triple).*$', '', src, flags=re.M)
entries = []
if EMU:
    # the runtime's "// tile-config:" lines before the module
    src = "\n".join(l for l in src.split("\n") if not l.startswith("//"))
    for m in re.finditer(r"^define ptx_kernel void @([\w.$]+)\((.*)\)[^\n]*\{$", src, flags=re.M):
        name, ps = m.group(1), split_args(m.group(2))
        lines, args = ["define void @emu_entry_%s(ptr %%params) {" % name], []
        for i, prm in enumerate(ps):
            prm = prm.strip()
            lines.append("  %%q%d = getelementptr ptr, ptr %%params, i64 %d" % (i, i))
            lines.append("  %%a%d = load ptr, ptr %%q%d" % (i, i))
            if prm.startswith("ptr byval("):
                args.append(prm[:prm.rindex("%")] + "%%a%d" % i)
                continue
            ty = "ptr addrspace(%s)" % re.match(r"ptr addrspace\((\d+)\)", prm).group(1) if prm.startswith("ptr addrspace") \
                else prm.split()[0]
            lines.append("  %%v%d = load %s, ptr %%a%d" % (i, ty, i))
            args.append("%s %%v%d" % (ty, i))
        lines += ["  call void @%s(%s)" % (name, ", ".join(args)), "  ret void", "}"]
        entries.append("\n".join(lines))
    for sreg, emu in (("cluster.ctarank", "rank"), ("clusterid.x", "clusterid"), ("nclusterid.x", "nclusterid")):
        src = src.replace("@llvm.nvvm.read.ptx.sreg.%s" % sreg, "@emu_%s" % emu)
        src = re.sub(r"declare [^\n]*@emu_%s\(\)[^\n]*" % emu, "declare i32 @emu_%s()" % emu, src)
    for sreg in ("ctaid", "nctaid"):
        for ax in "xyz":
            src = src.replace("@llvm.nvvm.read.ptx.sreg.%s.%s" % (sreg, ax), "@emu_%s_%s" % (sreg, ax))
            src = re.sub(r"declare [^\n]*@emu_%s_%s\(\)[^\n]*" % (sreg, ax), "declare i32 @emu_%s_%s()" % (sreg, ax), src)
    src = re.sub(r"@vprintf\b", "@emu_vprintf", src)
    for nv, emu in (("ex2.approx.ftz.f", "ex2_ftz"), ("ex2.approx.f", "ex2"), ("rcp.approx.ftz.f", "rcp_ftz")):
        src = src.replace("@llvm.nvvm.%s(" % nv, "@emu_%s(" % emu)
        src = re.sub(r"declare [^\n]*@emu_%s\([^\n]*" % emu, "declare float @emu_%s(float)" % emu, src)
    src = src.replace("@llvm.nvvm.prmt(", "@emu_prmt(")   # the f8 quad shuffle's byte select
    src = re.sub(r"declare [^\n]*@emu_prmt\([^\n]*", "declare i32 @emu_prmt(i32, i32, i32)", src)
src = src.replace("define ptx_kernel", "define")
src = src.replace("@llvm.nvvm.read.ptx.sreg.tid.x", "@emu_tid").replace("@llvm.nvvm.read.ptx.sreg.ctaid.x", "@emu_ctaid")
src = src.replace("@llvm.nvvm.barrier0", "@emu_barrier")
# a kernel with a producer warpgroup (ws) or walking tiles (persistent) or of clusters
for sreg, emu in (("nctaid.x", "nctaid"), ("cluster.ctarank", "rank"), ("clusterid.x", "clusterid"),
                  ("nclusterid.x", "nclusterid")):
    src = src.replace("@llvm.nvvm.read.ptx.sreg.%s" % sreg, "@emu_%s" % emu)
src = src.replace("@llvm.nvvm.barrier.sync.cnt", "@emu_barrier_cnt")
src = re.sub(r'declare [^\n]*@emu_barrier_cnt\([^\n]*', 'declare void @emu_barrier_cnt(i32, i32)', src)
if VALUES:
    src = re.sub(r"@llvm\.nvvm\.shfl\.sync\.(bfly|up|down|idx)\.i32", r"@emu_shfl_\1", src)
    src = re.sub(r"declare [^\n]*@emu_shfl_(\w+)\([^\n]*", r"declare i32 @emu_shfl_\1(i32, i32, i32, i32)", src)
else:   # the GEMM's one shuffle: its warpgroup's row from lane 0, the same in every lane
    src = src.replace("@llvm.nvvm.shfl.sync.idx.i32", "@emu_shfl_own")
    src = re.sub(r"declare [^\n]*@emu_shfl_own\([^\n]*", "", src)
    src += "\ndefine internal i32 @emu_shfl_own(i32 %m, i32 %v, i32 %l, i32 %c) {\n  ret i32 %v\n}\n"
src = re.sub(r'"target-cpu"="[^"]*"', '', src)
src = re.sub(r'"target-features"="[^"]*"', '', src)
src = re.sub(r'declare noundef i32 @emu_(tid|ctaid|nctaid|rank|clusterid|nclusterid)\(\) #\d+', r'declare i32 @emu_\1()', src)
src = re.sub(r'declare void @emu_barrier\(\) #\d+', 'declare void @emu_barrier()', src)
src += "\ndeclare void @chk_wgmma(i64, i64, i32, i32, i32)\ndeclare void @chk_ldm(i32)\ndeclare void @chk_cp(i32, i64, i32, i32, i32)\ndeclare void @chk_st(i32, i64, i32)\ndeclare void @chk_tma_st(i64, i32, i32, i32)\n"
src += "declare void @chk_tma(i32, i64, i32, i32, i32)\ndeclare void @chk_mbar(i32)\n"
src += "declare void @chk_tma_mc(i32, i64, i32, i32, i32, i16)\ndeclare void @chk_remote_arrive(i32, i32)\n"
src += "declare void @emu_cluster_barrier()\ndeclare void @emu_bar_sync(i32, i32)\ndeclare void @emu_bar_arrive(i32, i32)\n"
src += "\n".join(d for _, d in decls.values())
if EMU:
    src += "\n" + "\n".join(entries) + "\n"
    for sig in ("void @emu_wgmma(ptr, ptr, i64, i64, i32, i32, i32, i32, i32)", "i32 @emu_cvt_bf16x2(float, float)", "i16 @emu_cvt_e4m3x2(float, float)",
                "i32 @emu_cvt_f16x2(float, float)", "void @emu_st_global(i32, i64, ptr, i32)", "void @emu_red_add_f32(i32, i64, ptr, i32)",
                "void @emu_ld_global(i32, i64, ptr, i32)", "void @emu_cp_async(i32, i64, i32, i32)",
                "void @emu_st_shared(i32, ptr, i32)",
                "void @emu_tma_load(i32, i64, i32, i32, i32)", "void @emu_tma_load_mc(i32, i64, i32, i32, i32, i32)",
                "void @emu_tma_store(i64, i32, i32, i32)", "void @emu_tma_load3(i32, i64, i32, i32, i32, i32)",
                "void @emu_tma_load_mc3(i32, i64, i32, i32, i32, i32, i32)",
                "void @emu_tma_store3(i64, i32, i32, i32, i32)", "void @emu_mbar_init(i32, i32)",
                "void @emu_mbar_arrive_tx(i32, i32)", "void @emu_mbar_arrive(i32)", "void @emu_mbar_wait(i32, i32)",
                "void @emu_mbar_arrive_remote(i32, i32)", "void @emu_cluster_sync(i32)",
                "void @emu_ldmatrix(i32, i32, ptr, i32)", "void @emu_mma(ptr, ptr, ptr, i32)"):
        src += "declare %s\n" % sig
    # truncation to bfloat is a libcall on the host (libgcc 12 has none): the emulator's,
    # rounded once to nearest even
    for lib, emu, ty in (("__truncsfbf2", "emu_f2bf", "float"), ("__truncdfbf2", "emu_d2bf", "double")):
        src += "define bfloat @%s(%s %%x) {\n  %%b = call i16 @%s(%s %%x)\n" % (lib, ty, emu, ty)
        src += "  %%r = bitcast i16 %%b to bfloat\n  ret bfloat %%r\n}\ndeclare i16 @%s(%s)\n" % (emu, ty)
    left = sorted(set(re.findall(r"@llvm\.nvvm\.[\w.]+", src)))
    if left:
        sys.exit("emu: NVVM intrinsics the emulator does not model: " + ", ".join(left))
open(sys.argv[2], "w").write(src)
SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "float": 4, "bfloat": 2, "half": 2, "double": 8}
nremap = [0]


def remap_shared(l, outl):
    """--emu: a load, store or atomic through a shared pointer (an SSA value, @__tile_smem
    or a constant expression on it) goes through emu_sh, which gives the calling thread's
    CTA's shared memory at that offset (the CTAs of a cluster run at once, each with its
    own) after checking it; the line is returned with the pointer replaced."""
    m = re.match(r"\s*(?:%[\w.]+ = )?(load|store|atomicrmw|cmpxchg)\b", l)
    at = l.find("ptr addrspace(3) ")
    if not m or at < 0:
        return l
    j = at + len("ptr addrspace(3) ")
    if l.startswith("%", j) or l.startswith("@", j):
        k = j + 1
        while k < len(l) and (l[k].isalnum() or l[k] in "._$"):
            k += 1
    else:   # a constant expression: to its closing parenthesis
        k = l.index("(", j)
        depth = 0
        while True:
            depth += {"(": 1, ")": -1}.get(l[k], 0)
            k += 1
            if depth == 0:
                break
    ptr = l[j:k]
    size = 0
    if m.group(1) == "load":
        ty = re.match(r"\s*%[\w.]+ = load (?:atomic )?(?:volatile )?(<(\d+) x (\w+)>|\w+),", l)
    else:
        ty = re.match(r"\s*(?:%[\w.]+ = )?(?:store|atomicrmw \w+|cmpxchg) (?:atomic )?(?:volatile )?"
                      r"(?:ptr addrspace\(3\) \S+, )?(<(\d+) x (\w+)>|\w+) ", l)
    if ty:
        size = int(ty.group(2)) * SIZES.get(ty.group(3), 0) if ty.group(2) else SIZES.get(ty.group(1), 0)
    # the alignment the instruction promises (NVPTX splits an access aligned below its size)
    al = re.search(r", align (\d+)", l)
    align = min(size, int(al.group(1))) if al and size else size
    nremap[0] += 1
    name = "%%emu.sh%d" % nremap[0]
    outl.append("  %s = call ptr @emu_sh(ptr addrspace(3) %s, i32 %d, i32 %d)" % (name, ptr, size, align))
    return l[:at] + "ptr " + name + l[k:]


# instrument shared loads and stores: a check of the address before each
s = open(sys.argv[2]).read()
lines = s.split("\n")
outl = []
for l in lines:
    m = re.search(r"(?:load (i\d+|float|bfloat|half), ptr addrspace\(([13])\) (%[\w.]+))|"
                  r"(?:store (i\d+|float|bfloat|half) [^,]+, ptr addrspace\(([13])\) (%[\w.]+))", l)
    if m:
        ty = m.group(1) or m.group(4); sp = m.group(2) or m.group(5); p = m.group(3) or m.group(6)
        sz = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "float": 4, "bfloat": 2, "half": 2}[ty]
        fn = "chk_sh" if sp == "3" else ("chk_gl" if m.group(1) else "chk_gs")
        if not (EMU and sp == "3"):
            outl.append("  call void @%s(ptr addrspace(%s) %s, i32 %d)" % (fn, sp, p, sz))
    if EMU:
        l = remap_shared(l, outl)
    outl.append(l)
s = "\n".join(outl) + "\ndeclare void @chk_sh(ptr addrspace(3), i32)\ndeclare void @chk_gl(ptr addrspace(1), i32)\ndeclare void @chk_gs(ptr addrspace(1), i32)\n"
# 32-bit shared addresses made pointers (the shared window is 32 bits on the GPU; the
# host's is its own address space): through the harness
s = re.sub(r"(%[\w.]+) = inttoptr (i32|i64) (%[\w.]+) to ptr addrspace\(3\)",
           r"\1 = call ptr addrspace(3) @emu_shared_ptr_\2(\2 \3)", s)
s += "declare ptr addrspace(3) @emu_shared_ptr_i32(i32)\ndeclare ptr addrspace(3) @emu_shared_ptr_i64(i64)\n"
if EMU:
    s += "declare ptr @emu_sh(ptr addrspace(3), i32, i32)\n"
open(sys.argv[2], "w").write(s)
