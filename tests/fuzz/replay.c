/* Replays fuzz inputs through a harness without libFuzzer, so the test suite runs
 * every saved crash (tests/fuzz/regressions), the seed corpus and the examples through
 * the whole compiler on every build: a fixed bug stays fixed.
 *   usage: fuzz-replay DIR...  */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 1;
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "fuzz-replay: cannot open %s\n", argv[i]);
            return 1;
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            count += replay_file(path);
        }
        closedir(d);
    }
    printf("fuzz-replay: %d inputs replayed without a crash\n", count);
    return count ? 0 : 1;
}
