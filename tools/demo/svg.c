/*
 * svg.c - the demo's plot, written by hand as SVG (no plotting dependency).
 *
 * One panel per scenario that ran, time in seconds since its queries began (each panel spans its
 * own run: a naive rebuild can outlast --seconds, and the readers keep going until it commits):
 *  - query latency p50 and p99 per time bucket, log scale (left axis, shared by all panels so they
 *    compare at a glance);
 *  - below it, a strip of its own for the counts per bucket: failed queries (red), false negatives
 *    (purple) and answers given by the degrade policy instead of Redis (green), side by side on a
 *    log(1 + n) scale with labelled decades, so 6 errors still show beside 10,000 false negatives;
 *  - rotations shaded, with a dashed line where one began and a solid one where it committed (red
 *    when it failed); an outage ("Redis stopped") shaded in red.
 */
#include "demo.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define W        1000
#define LEFT     80
#define RIGHT    80
#define PANEL_H  285
#define PLOT_TOP 40      /* inside a panel: room for its title */
#define PLOT_H   140     /* the latency plot */
#define COUNT_GAP 22     /* between it and the counts strip: the time axis's labels */
#define COUNT_H  70      /* the counts strip */
#define HEAD     70      /* title and legend */

static void text_escaped(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      default:
        if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, out);
    }
  }
}

/* 1234567 -> "1,234,567" */
static void fmt_count(char *buf, size_t n, uint64_t v) {
  char digits[32];
  int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v), o = 0;
  for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
    if (i && (len - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
}

/* "1 error" / "2 errors", the count with thousands separators */
static void fmt_counted(char *buf, size_t n, uint64_t v, const char *one, const char *many) {
  char c[32];
  fmt_count(c, sizeof c, v);
  snprintf(buf, n, "%s %s", c, v == 1 ? one : many);
}

static void fmt_latency(char *buf, size_t n, double us) {
  if (us >= 1e6) snprintf(buf, n, "%.3g s", us / 1e6);
  else if (us >= 1e3) snprintf(buf, n, "%.3g ms", us / 1e3);
  else snprintf(buf, n, "%.3g us", us);
}

/* The shared latency axis: powers of ten around every bucket's p50 and p99. */
static void latency_range(const demo_result *rs, int n, double *lo, double *hi) {
  double mn = INFINITY, mx = 0;
  for (int i = 0; i < n; i++) {
    if (!rs[i].ran) continue;
    for (int k = 0; k < rs[i].series.nbuckets; k++) {
      const demo_bucket *b = &rs[i].series.b[k];
      if (!b->queries) continue;
      double p50 = demo_bins_quantile(b->bins, 0.5), p99 = demo_bins_quantile(b->bins, 0.99);
      if (p50 < mn) mn = p50;
      if (p99 > mx) mx = p99;
    }
  }
  if (!isfinite(mn) || mx <= 0) { mn = 10; mx = 1e6; }
  *lo = pow(10, floor(log10(mn)));
  *hi = pow(10, ceil(log10(mx)));
  if (*hi <= *lo * 10) *hi = *lo * 100;
}

static double nice_step(double span, int ticks) {
  double raw = span / ticks, p = pow(10, floor(log10(raw)));
  double m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void polyline(FILE *out, const demo_series *s, double seconds, double q, double lo, double hi, double x0,
                     double xscale, double ytop, const char *color) {
  int open = 0;
  for (int k = 0; k < s->nbuckets && ((double)k + 0.5) * (double)s->bucket_us / 1e6 <= seconds; k++) {
    const demo_bucket *b = &s->b[k];
    if (!b->queries) {  /* no query finished here: a gap, not a line through zero */
      if (open) fputs("\"/>\n", out);
      open = 0;
      continue;
    }
    double v = demo_bins_quantile(b->bins, q);
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    double x = x0 + ((double)k + 0.5) * (double)s->bucket_us / 1e6 * xscale;
    double y = ytop + PLOT_H * (1 - log10(v / lo) / log10(hi / lo));
    if (!open)
      fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", color);
    fprintf(out, "%.1f,%.1f ", x, y);
    open = 1;
  }
  if (open) fputs("\"/>\n", out);
}

static void panel(FILE *out, const demo_result *r, int top, double planned, double lo, double hi) {
  const demo_series *s = &r->series;
  double seconds = r->duration_s > planned ? r->duration_s : planned;
  double x0 = LEFT, pw = W - LEFT - RIGHT, xscale = pw / seconds, ytop = top + PLOT_TOP;
  char p50[32], p99[32], queries[48], errors[48], fneg[64], rebuilds[48];
  fmt_latency(p50, sizeof p50, r->p50_us);
  fmt_latency(p99, sizeof p99, r->p99_us);
  fmt_counted(queries, sizeof queries, r->queries, "query", "queries");
  fmt_counted(errors, sizeof errors, r->errors, "error", "errors");
  fmt_counted(fneg, sizeof fneg, r->false_neg, "false negative", "false negatives");
  fmt_counted(rebuilds, sizeof rebuilds, (uint64_t)r->rotations_ok, "rebuild", "rebuilds");
  fprintf(out, "<g id=\"panel-%s\">\n", r->name);
  fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", LEFT, top + 18, r->name);
  fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s, %s, %s, p50 %s, p99 %s; %s", LEFT + 75, top + 18,
          queries, errors, fneg, p50, p99, rebuilds);
  if (r->rotations_ok) fprintf(out, " (mean %.2f s)", r->rebuild_mean_s);
  if (r->rotations_failed) fprintf(out, ", %d failed", r->rotations_failed);
  if (r->degraded) {
    char deg[64];
    fmt_counted(deg, sizeof deg, r->degraded, "answer", "answers");
    fprintf(out, "; %s from the policy", deg);
  }
  fputs("</text>\n", out);
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#fbfbfb\" stroke=\"#999\"/>\n", x0,
          ytop, pw, PLOT_H);

  /* rotations and outages under the data */
  for (int i = 0; i < r->nmarks; i++) {
    const demo_mark *m = &r->marks[i];
    double a = x0 + m->t0 * xscale, b = x0 + (m->t1 < seconds ? m->t1 : seconds) * xscale;
    if (b < a + 1) b = a + 1;
    if (m->kind == DEMO_MARK_OUTAGE) {
      fprintf(out, "<rect class=\"outage\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#ffd0d0\" "
                   "opacity=\"0.7\"/>\n", a, ytop, b - a, PLOT_H);
      fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#a00\">Redis stopped</text>\n", a + 3,
              ytop + 12);
      continue;
    }
    fprintf(out, "<rect class=\"rotation\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#cfe0ff\" "
                 "opacity=\"0.6\"/>\n", a, ytop, b - a, PLOT_H);
    fprintf(out, "<line class=\"rotation-begin\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2a5db0\" "
                 "stroke-dasharray=\"4,3\"/>\n", a, ytop, a, ytop + PLOT_H);
    if (m->t1 <= seconds)
      fprintf(out, "<line class=\"rotation-%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"1.5\"/>\n", m->ok ? "commit" : "failed", b, ytop, b, ytop + PLOT_H,
              m->ok ? "#2a5db0" : "#d00");
  }

  /* the counts strip: errors, false negatives, policy answers per bucket, side by side, log(1 + n) */
  double ctop = ytop + PLOT_H + COUNT_GAP;
  uint64_t cmax = 0;
  for (int k = 0; k < s->nbuckets; k++) {
    const demo_bucket *b = &s->b[k];
    uint64_t v = b->errors > b->false_neg ? b->errors : b->false_neg;
    if (b->degraded > v) v = b->degraded;
    if (v > cmax) cmax = v;
  }
  double ctopv = 10; /* the strip's top: the decade above the largest count */
  while (ctopv < (double)cmax) ctopv *= 10;
  double cscale = COUNT_H / log10(1 + ctopv);
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#fbfbfb\" stroke=\"#999\"/>\n", x0,
          ctop, pw, COUNT_H);
  for (double v = 0; v <= ctopv * 1.001; v = v ? v * 10 : 1) {
    char lab[32];
    double y = ctop + COUNT_H - log10(1 + v) * cscale;
    fmt_count(lab, sizeof lab, (uint64_t)v);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", x0, y, x0 + pw, y);
    fprintf(out, "<text class=\"count-tick\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s</text>\n",
            x0 - 5, y + 3.5, lab);
  }
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\">per %.0f ms</text>\n", x0 + pw + 5,
          ctop + COUNT_H / 2.0 + 3, (double)s->bucket_us / 1e3);
  double bw = (double)s->bucket_us / 1e6 * xscale, sub = bw / 3;
  for (int k = 0; k < s->nbuckets && cmax; k++) {
    const demo_bucket *b = &s->b[k];
    double x = x0 + (double)k * (double)s->bucket_us / 1e6 * xscale;
    if (x + bw > x0 + pw + 0.5) break;
    const struct { uint64_t v; const char *color, *cls; } parts[] = {
      {b->errors, "#d62728", "errors"}, {b->false_neg, "#9467bd", "false-negatives"},
      {b->degraded, "#2ca02c", "policy-answers"}};
    for (size_t j = 0; j < 3; j++) {
      if (!parts[j].v) continue;
      double h = log10(1 + (double)parts[j].v) * cscale;
      fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
              parts[j].cls, x + (double)j * sub, ctop + COUNT_H - h, sub > 1.2 ? sub - 0.3 : sub, h, parts[j].color);
    }
  }
  if (!cmax)
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">no errors, false negatives or "
                 "policy answers</text>\n", x0 + 6, ctop + COUNT_H / 2.0 + 4);

  polyline(out, s, seconds, 0.50, lo, hi, x0, xscale, ytop, "#1f4e79");
  polyline(out, s, seconds, 0.99, lo, hi, x0, xscale, ytop, "#ff7f0e");
  if (seconds > planned * 1.01) {
    double x = x0 + planned * xscale;
    fprintf(out, "<line class=\"planned-end\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" "
                 "stroke-dasharray=\"2,4\"/>\n", x, ytop, x, ytop + PLOT_H);
    int left_half = x < x0 + pw / 2; /* write the label where there is room */
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\" text-anchor=\"%s\">planned end "
                 "(%g s); queries went on until the rebuild committed</text>\n", left_half ? x + 4 : x - 4,
            ytop + PLOT_H - 6, left_half ? "start" : "end", planned);
  }

  /* left axis: latency decades */
  for (double v = lo; v <= hi * 1.001; v *= 10) {
    char lab[32];
    double y = ytop + PLOT_H * (1 - log10(v / lo) / log10(hi / lo));
    fmt_latency(lab, sizeof lab, v);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x0 + pw, y);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", x0 - 5, y + 4, lab);
  }
  /* time axis */
  double step = nice_step(seconds, 8);
  for (double t = 0; t <= seconds + 1e-9; t += step) {
    double x = x0 + t * xscale;
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g s</text>\n", x,
            ytop + PLOT_H + 15, t);
  }
  fputs("</g>\n", out);
}

int demo_write_svg(const char *path, const demo_result *rs, int n, const demo_config *cfg) {
  int shown = 0;
  for (int i = 0; i < n; i++) shown += rs[i].ran;
  int height = HEAD + (shown ? shown : 1) * PANEL_H + 20;
  FILE *out = fopen(path, "w");
  if (!out) return -1;
  double lo, hi;
  latency_range(rs, n, &lo, &hi);
  fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n", W, height, W, height);
  fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, height);
  char items[32];
  fmt_count(items, sizeof items, (uint64_t)cfg->items);
  fprintf(out, "<text x=\"%d\" y=\"24\" font-size=\"17\" font-weight=\"bold\">bloomguard demo: a %s-item "
               "filter rebuilt while %d thread%s query it (%g s per scenario)</text>\n", LEFT, items,
          cfg->threads, cfg->threads == 1 ? "" : "s", cfg->seconds);
  /* legend */
  const struct { const char *color, *label; int line; } legend[] = {
    {"#1f4e79", "p50 latency", 1}, {"#ff7f0e", "p99 latency", 1}, {"#d62728", "errors", 0},
    {"#9467bd", "false negatives", 0}, {"#2ca02c", "answers from the policy", 0},
    {"#cfe0ff", "rotation (dashed: begin, solid: commit)", 0}, {"#ffd0d0", "Redis stopped", 0}};
  double lx = LEFT;
  for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
    if (legend[i].line)
      fprintf(out, "<line x1=\"%.0f\" y1=\"45\" x2=\"%.0f\" y2=\"45\" stroke=\"%s\" stroke-width=\"2\"/>\n", lx,
              lx + 16, legend[i].color);
    else
      fprintf(out, "<rect x=\"%.0f\" y=\"39\" width=\"16\" height=\"12\" fill=\"%s\"/>\n", lx, legend[i].color);
    fprintf(out, "<text x=\"%.0f\" y=\"49\" font-size=\"11\">%s</text>\n", lx + 20, legend[i].label);
    lx += 30 + 6.0 * (double)strlen(legend[i].label);
  }
  int top = HEAD;
  for (int i = 0; i < n; i++) {
    if (!rs[i].ran) continue;
    panel(out, &rs[i], top, cfg->seconds, lo, hi);
    top += PANEL_H;
  }
  if (!shown) {
    fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"13\">", LEFT, HEAD + 30);
    text_escaped(out, "no scenario ran");
    fputs("</text>\n", out);
  }
  fputs("</svg>\n", out);
  if (ferror(out)) {
    int e = errno;
    fclose(out);
    errno = e ? e : EIO;
    return -1;
  }
  return fclose(out) == 0 ? 0 : -1;
}
