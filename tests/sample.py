"""Which cases of a long suite run: a sample chosen by a seed, and a shard.

CI (scripts/test.sh) runs the emulated suites and ptxas-all on a sample: with
TILE_TEST_SAMPLE=N set, a case runs when a hash of the seed and its name falls in 1 of
N buckets, so each seed covers a different deterministic slice (about 100/N percent)
and any run is repeated exactly by giving its seed again (TILE_TEST_SEED, printed at the
start of each sampled suite). Unset, or N = 1, every case runs (scripts/test.sh --full).
A shard (--shard I/N on a suite's command line, I from 1) takes every Nth of the
selected cases, so one suite can be several ctest tests that run side by side and
report one by one.

    python3 tests/sample.py [--shard I/N] NAME...   prints the NAMEs that run, one a line
                                                    (and on stderr how they were chosen)
"""
import hashlib
import os
import sys


class Sample:
    def __init__(self, argv=(), what="cases"):
        self.every = int(os.environ.get("TILE_TEST_SAMPLE") or 1)
        self.seed = os.environ.get("TILE_TEST_SEED") or "0"
        self.what = what
        self.shard, self.shards = 1, 1
        argv = list(argv)
        if "--shard" in argv:
            i, n = argv[argv.index("--shard") + 1].split("/")
            self.shard, self.shards = int(i), int(n)
            if not 1 <= self.shard <= self.shards:
                raise SystemExit("sample.py: --shard takes I/N with 1 <= I <= N, got %s/%s" % (i, n))

    def sampled(self, name):
        """Whether `name` is in this seed's slice (before sharding)."""
        if self.every <= 1:
            return True
        h = hashlib.sha1(("%s:%s" % (self.seed, name)).encode()).digest()
        return int.from_bytes(h[:8], "little") % self.every == 0

    def select(self, names, out=None):
        """The names this run takes, in their order; says on `out` (stdout) which."""
        names = list(names)
        kept = [n for n in names if self.sampled(n)]
        kept = kept[self.shard - 1::self.shards]
        self.banner(len(kept), len(names), out or sys.stdout)
        return kept

    def banner(self, kept, total, out):
        shard = " (shard %d of %d)" % (self.shard, self.shards) if self.shards > 1 else ""
        if self.every > 1:
            print("sampled: %d of %d %s%s, 1 in %d by seed %s (TILE_TEST_SEED=%s TILE_TEST_SAMPLE=%d repeats "
                  "it; without TILE_TEST_SAMPLE every case runs)" % (kept, total, self.what, shard, self.every,
                                                                     self.seed, self.seed, self.every),
                  file=out, flush=True)
        else:
            print("all %d %s%s (TILE_TEST_SAMPLE=N runs 1 in N)" % (kept, self.what, shard), file=out, flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    s = Sample(args, "files")
    if "--shard" in args:
        i = args.index("--shard")
        args = args[:i] + args[i + 2:]
    for name in s.select(args, sys.stderr):
        print(name)
