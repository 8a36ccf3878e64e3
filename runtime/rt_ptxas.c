/* The CUDA toolkit's ptxas, run as a program, as the assembler of a variant's PTX into
 * the cubin that the disk cache keeps: the default wherever one is found.
 *
 * Why not the driver's cuLink* (which needs nothing installed): a link step assembles
 * every PTX as a relocatable object (as `ptxas -c`), and in that mode ptxas
 *   - ignores setmaxnreg (C7504 "ignored to maintain compatibility across compilation
 *     units"): a warp-specialized kernel's consumers keep the entry's register count
 *     instead of the 232 the producer gives up;
 *   - serializes every wgmma of a function that calls a subroutine (C7509 "serialized
 *     due to the presence of Extern calls"): one IEEE `div.rn` (attention's acc / l)
 *     or an f64 log is such a call, and each wgmma then waits for the one before it.
 * Measured on the H200 (scripts/gpu-profile.sh, ncu at a48d243): attn_fwd_tma's cubin
 * from cuLink had a `WARPGROUP.DEPBAR.LE gsb0, 0x0` after each of its 24 HGMMAs, the
 * same PTX through ptxas 4; nvJitLink links the same way as cuLink. Without a disk
 * cache the driver loads the PTX itself (cuModuleLoadDataEx, a whole program), so only
 * the cached path needed this. Triton runs ptxas the same way.
 *
 * Which ptxas: $TILE_PTXAS (a path: the only one tried), else $CUDA_HOME/bin/ptxas,
 * $CUDA_PATH/bin/ptxas, /usr/local/cuda/bin/ptxas, then `ptxas` on $PATH. It must read
 * PTX 8.3 (CUDA 12.3 or later) and not be newer than the driver's major version (its
 * cubins would not load); `ptxas --version` is asked once per process (about 5 ms, with
 * a disk cache only: the cubin key names the assembler). When none fits, cuLink
 * assembles (TILE_ASSEMBLER=driver asks for that; =nvjitlink for rt_nvjitlink.c), with
 * one note on stderr. Its cubins carry the assembler and its version in their keys. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/diag.h"   /* source_read */
#include "rt_internal.h"

extern char **environ;

typedef struct Ptxas {
    char path[1024];
    int version;          /* major * 1000 + minor * 10, as cuDriverGetVersion */
    char why[1200];       /* why there is none */
} Ptxas;

static Ptxas px;
static pthread_mutex_t px_lock = PTHREAD_MUTEX_INITIALIZER;
static bool px_looked;

/* Runs argv[0] with its standard output and error in the file `log` (truncated).
 * Returns the exit status, or -1 when it could not be run (errno kept). */
static int run(char *const argv[], const char *log)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa)) return -1;
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) {
        errno = e;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A temporary file name (kind names it), created empty (mode 0600): in $TMPDIR, else
 * (unset, or not writable) in /tmp. */
static bool temp_file(char *buf, size_t n, const char *kind)
{
    const char *env = getenv("TMPDIR");
    const char *dirs[2] = {env && env[0] ? env : "/tmp", "/tmp"};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, n, "%s/tile-ptxas-%s-XXXXXX", dirs[i], kind);
        int fd = mkstemp(buf);
        if (fd >= 0) {
            close(fd);
            return true;
        }
    }
    return false;
}

/* "Cuda compilation tools, release 13.0, V13.0.88" -> 13000; 0 when it does not run. */
static int version_of(const char *path)
{
    char log[256];
    if (!temp_file(log, sizeof log, "version")) return 0;
    char *argv[] = {(char *)path, "--version", NULL};
    int v = 0;
    if (run(argv, log) == 0) {
        Source *text = source_read(log);
        const char *r = text ? strstr(text->text, "release ") : NULL;
        int major, minor;
        if (r && sscanf(r, "release %d.%d", &major, &minor) == 2) v = major * 1000 + minor * 10;
        source_free(text);
    }
    unlink(log);
    return v;
}

static bool executable(const char *p) { return p[0] && access(p, X_OK) == 0; }

static void find_ptxas(int driver_version)
{
    const char *env = getenv("TILE_PTXAS");
    char tries[5][1024];
    int n = 0;
    if (env && env[0]) {
        snprintf(tries[n++], sizeof tries[0], "%s", env);
    } else {
        const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
        for (size_t i = 0; i < 3; i++)
            if (homes[i] && homes[i][0]) snprintf(tries[n++], sizeof tries[0], "%s/bin/ptxas", homes[i]);
        const char *path = getenv("PATH");
        while (path && *path && n < 5) {   /* the first ptxas on PATH */
            size_t len = strcspn(path, ":");
            if (len) {
                snprintf(tries[n], sizeof tries[0], "%.*s/ptxas", (int)len, path);
                if (executable(tries[n])) {
                    n++;
                    break;
                }
            }
            path += len + (path[len] == ':');
        }
    }
    for (int i = 0; i < n; i++) {
        if (!executable(tries[i])) continue;
        int v = version_of(tries[i]);
        if (!v) {
            snprintf(px.why, sizeof px.why, "%.1000s does not run (--version)", tries[i]);
            continue;
        }
        if (v < 12030) {   /* PTX ISA 8.3 (RT_PTX_VERSION) came with CUDA 12.3 */
            snprintf(px.why, sizeof px.why, "%.1000s is CUDA %d.%d, too old for PTX %s", tries[i], v / 1000,
                     v % 1000 / 10, RT_PTX_VERSION);
            continue;
        }
        if (v / 1000 > driver_version / 1000) {
            snprintf(px.why, sizeof px.why, "%.1000s is CUDA %d.%d, newer than the driver (%d.%d)", tries[i],
                     v / 1000, v % 1000 / 10, driver_version / 1000, driver_version % 1000 / 10);
            continue;
        }
        memcpy(px.path, tries[i], sizeof px.path);   /* both 1024, NUL-ended */
        px.version = v;
        return;
    }
    if (!px.why[0])
        snprintf(px.why, sizeof px.why, "no ptxas found (%s)",
                 env && env[0] ? "TILE_PTXAS" : "TILE_PTXAS, CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH");
}

RtAssembler rt_assembler(const TrtContext *ctx)
{
    const char *a = getenv("TILE_ASSEMBLER");
    if (a && !strcmp(a, "driver")) return RT_ASM_DRIVER;
    if (a && !strcmp(a, "nvjitlink")) return rt_nvjitlink_wanted() ? RT_ASM_NVJITLINK : RT_ASM_DRIVER;
    pthread_mutex_lock(&px_lock);
    if (!px_looked) find_ptxas(ctx->drv->version);
    px_looked = true;
    bool found = px.path[0] != 0;
    pthread_mutex_unlock(&px_lock);
    if (found) return RT_ASM_PTXAS;
    static atomic_flag noted = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&noted))
        fprintf(stderr, "tile: %s; the driver's linker assembles instead, which drops setmaxnreg and "
                        "can serialize wgmma (set TILE_PTXAS to a CUDA %d ptxas)\n",
                px.why, ctx->drv->version / 1000);
    return RT_ASM_DRIVER;
}

uint64_t rt_ptxas_version(void) { return (uint64_t)px.version; }

TrtStatus rt_ptxas_assemble(const char *arch, const char *ptx, RtBlob *out)
{
    enum { IN, CUBIN, LOG };
    static const char *const kinds[3] = {"ptx", "cubin", "log"};
    char files[3][512];
    for (int i = 0; i < 3; i++)
        if (!temp_file(files[i], sizeof files[i], kinds[i])) {
            TrtStatus e = rt_fail(TRT_ERROR_CACHE_IO, "ptxas: no temporary file (%s)", strerror(errno));
            while (i-- > 0) unlink(files[i]);
            return e;
        }
    TrtStatus s = TRT_SUCCESS;
    FILE *f = fopen(files[IN], "wb");
    size_t n = strlen(ptx);
    bool written = f && fwrite(ptx, 1, n, f) == n;
    if (f && fclose(f)) written = false;
    if (!written) {
        s = rt_fail(TRT_ERROR_CACHE_IO, "ptxas: cannot write %s", files[IN]);
    } else {
        char a[64];
        snprintf(a, sizeof a, "-arch=%s", arch);
        char *argv[] = {px.path, a, files[IN], "-o", files[CUBIN], NULL};
        int rc = run(argv, files[LOG]);
        Source *got = NULL;
        if (rc < 0) {
            s = rt_fail(TRT_ERROR_DRIVER, "ptxas (%s) could not be run: %s", px.path, strerror(errno));
        } else if (rc > 0) {
            got = source_read(files[LOG]);
            s = rt_fail(TRT_ERROR_DRIVER, "ptxas (%s) could not assemble the PTX (exit %d)%s%.4000s", px.path, rc,
                        got && got->len ? ":\n" : "", got ? got->text : "");
        } else if (!(got = source_read(files[CUBIN])) || !got->len) {
            s = rt_fail(TRT_ERROR_DRIVER, "ptxas (%s) gave no cubin", px.path);
        } else {   /* the cubin's bytes change owner */
            out->data = (void *)got->text;
            out->len = got->len;
            got->text = NULL;
        }
        source_free(got);
    }
    for (int i = 0; i < 3; i++) unlink(files[i]);
    return s;
}
