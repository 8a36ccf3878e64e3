/* The report of `tilec tune` (tune_report.h). */
#define _GNU_SOURCE
#include "tune_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* "matmul_bf16 M=512 N=512" -> "matmul_bf16_M512_N512" */
static void file_name(const char *what, char *buf, size_t n)
{
    size_t j = 0;
    for (const char *p = what; *p && j + 5 < n; p++) {
        if (*p == ' ') buf[j++] = '_';
        else if (*p == '=') continue;
        else buf[j++] = (*p == '/' || *p == '.') ? '-' : *p;
    }
    snprintf(buf + j, n - j, ".svg");
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static const RtCandidate *default_of(const RtTuneResult *r)
{
    for (uint32_t i = 0; i < r->ncands; i++)
        if (r->cands[i].is_default) return &r->cands[i];
    return NULL;
}

/* One horizontal bar per measured config, longest median = full width; the winner is
 * green, the default blue, the others grey; excluded configs are listed below. */
void tr_svg(FILE *f, const char *what, const RtTuneResult *r)
{
    enum { LABEL = 260, BAR = 420, ROW = 20, TOP = 40 };
    double max = 0;
    uint32_t ok = 0, bad = 0;
    for (uint32_t i = 0; i < r->ncands; i++) {
        if (r->cands[i].status == RT_CAND_OK) ok++, max = r->cands[i].median_ms > max ? r->cands[i].median_ms : max;
        else bad++;
    }
    int h = TOP + (int)(ok + bad) * ROW + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"monospace\" "
            "font-size=\"12\">\n", LABEL + BAR + 120, h);
    fputs("<text x=\"10\" y=\"20\" font-size=\"14\">", f);
    xml_text(f, what);
    fputs(": median time per config (ms)</text>\n", f);
    int y = TOP;
    for (uint32_t i = 0; i < r->ncands; i++) {
        const RtCandidate *c = &r->cands[i];
        char cfg[256];
        rt_tune_candidate_text(c, cfg, sizeof cfg);
        const char *color = (int)i == r->winner ? "#2a9d3a" : c->is_default ? "#3a6fd8" : "#999999";
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL - 6, y + 14);
        xml_text(f, cfg);
        fprintf(f, "%s%s</text>\n", c->is_default ? " (default)" : "", (int)i == r->winner ? " (winner)" : "");
        if (c->status == RT_CAND_OK) {
            int w = max > 0 ? (int)(c->median_ms / max * BAR) : 0;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", LABEL, y + 3, w < 1 ? 1 : w,
                    ROW - 6, color);
            fprintf(f, "<text x=\"%d\" y=\"%d\">%.4f</text>\n", LABEL + (w < 1 ? 1 : w) + 6, y + 14, c->median_ms);
        } else {
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#b03030\">%s</text>\n", LABEL, y + 14,
                    rt_cand_status_name(c->status));
        }
        y += ROW;
    }
    fputs("</svg>\n", f);
}

void tr_begin(TrReport *rep, const char *dir, const char *manifest)
{
    memset(rep, 0, sizeof *rep);
    rep->dir = dir;
    rep->ok = true;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "tilec tune: error: cannot make '%s': %s\n", dir, strerror(errno));
        rep->ok = false;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/report.md", dir);
    if (rep->ok && !(rep->md = fopen(path, "w"))) {
        fprintf(stderr, "tilec tune: error: cannot write '%s': %s\n", path, strerror(errno));
        rep->ok = false;
    }
    rep->det = open_memstream(&rep->details, &rep->ndetails);
    if (!rep->md || !rep->det) return;
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(rep->md, "# tilec tune: %s\n\n%s. Times are medians in ms; the speedup is the default "
            "config's time over the winner's.\n\n", manifest, when);
    fputs("| kernel and key | winner | ms | default ms | speedup | configs ok |\n|---|---|---|---|---|---|\n", rep->md);
}

static void key_details(TrReport *rep, const char *what, const RtTuneResult *r, const char *svg)
{
    FILE *f = rep->det;
    fprintf(f, "\n## %s\n\n![%s](%s)\n\n| config | status | median ms | min | max | runs | compile ms | why |\n"
            "|---|---|---|---|---|---|---|---|\n", what, what, svg);
    for (uint32_t i = 0; i < r->ncands; i++) {
        const RtCandidate *c = &r->cands[i];
        char cfg[256];
        rt_tune_candidate_text(c, cfg, sizeof cfg);
        fprintf(f, "| %s%s%s | %s | %.4f | %.4f | %.4f | %u | %.1f | %s |\n", cfg, c->is_default ? " (default)" : "",
                (int)i == r->winner ? " **winner**" : "", rt_cand_status_name(c->status), c->median_ms, c->min_ms,
                c->max_ms, c->runs, c->compile_ms, c->why);
    }
}

void tr_key(TrReport *rep, const char *what, const RtTuneResult *r)
{
    if (!rep->md || !rep->det) return;
    if (!r) {
        fprintf(rep->md, "| %s | (not tuned: no result in the cache) | | | | |\n", what);
        return;
    }
    const RtCandidate *w = &r->cands[r->winner], *d = default_of(r);
    char cfg[256], svg[512], path[4096];
    rt_tune_candidate_text(w, cfg, sizeof cfg);
    file_name(what, svg, sizeof svg);
    fprintf(rep->md, "| %s | %s%s | %.4f | ", what, cfg, w->is_default ? " (the default)" : "", w->median_ms);
    if (d && d->status == RT_CAND_OK && w->median_ms > 0)
        fprintf(rep->md, "%.4f | %.2fx |", d->median_ms, d->median_ms / w->median_ms);
    else
        fputs("- | - |", rep->md);
    fprintf(rep->md, " %u of %u |\n", r->removed[RT_CAND_OK], r->ncands);
    key_details(rep, what, r, svg);
    snprintf(path, sizeof path, "%s/%s", rep->dir, svg);
    FILE *f = fopen(path, "w");
    if (!f || (tr_svg(f, what, r), fclose(f))) {
        fprintf(stderr, "tilec tune: error: cannot write '%s': %s\n", path, strerror(errno));
        rep->ok = false;
    }
}

bool tr_end(TrReport *rep)
{
    if (rep->det) fclose(rep->det);
    if (rep->md) {
        if (rep->details) fwrite(rep->details, 1, rep->ndetails, rep->md);
        if (fclose(rep->md)) rep->ok = false;
        else fprintf(stdout, "tune: report in %s/report.md\n", rep->dir);
    }
    free(rep->details);
    return rep->ok;
}
