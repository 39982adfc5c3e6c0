/* bench_halo_exchange's report: the human summary and the JSON line. */
#include <stdio.h>

#include "bench_common.h"
#include "halo_exchange.h"
#include "mpi_launch.h"

static const char *size_name(size_t b)
{
    static char buf[4][24];
    static int next;
    char *out = buf[next++ % 4];

    if (b >= ((size_t)1 << 20))
        snprintf(out, 24, "%zu MiB", b >> 20);
    else
        snprintf(out, 24, "%zu KiB", b >> 10);
    return out;
}

static int blocks_of(int pattern)
{
    return pattern == 0 ? 2 : 1;
}

/* GB/s (1e9 bytes) a rank sends per exchange; -1 for none. */
static double gbps(int pattern, size_t bytes, double us)
{
    return us > 0 ? (double)blocks_of(pattern) * (double)bytes / (us * 1e3)
                  : -1;
}

static double target_for(int s)
{
    return s >= BIG_S ? TARGET_BIG : TARGET_ALL;
}

/* Whether mode m meets the targets at every point. */
static bool mode_passes(const struct results *r, int m, double *min_all,
                        double *min_big)
{
    bool ok = r->mpi_ok[0] && r->mpi_ok[1];

    *min_all = *min_big = 1e30;
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                double ratio = r->p[i][p][s].ratio[m];

                if (s < BIG_S && ratio < *min_all)
                    *min_all = ratio;
                if (s >= BIG_S && ratio < *min_big)
                    *min_big = ratio;
                ok = ok && ratio >= target_for(s);
            }
    return ok;
}

/* Per round: push / halo / MPI time, then that round's halo ratio. */
static void print_rounds(const struct options *opt,
                         const struct results *rounds)
{
    printf("by round: push / halo / MPI us (halo ratio of that round):\n");
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                printf("  %d %s %7s:", chip_counts[i], pat_names[p],
                       size_name(sizes[s]));
                for (int k = 0; k < opt->rounds; k++) {
                    const struct point *pt = &rounds[k].p[i][p][s];

                    printf("  %.1f/%.1f/%.1f (%.2f)", pt->us[0], pt->us[1],
                           pt->mpi_us, pt->ratio[HEAD_MODE]);
                }
                printf("\n");
            }
}

void print_summary(const struct options *opt, const struct results *r,
                   const struct results *rounds)
{
    printf("bench_halo_exchange (%s, %d round%s): time per exchange (us) and "
           "GB/s a rank sends\n(blocks x bytes per neighbour / time); "
           "slowest rank, medians; an exchange = pack + move + receiver reads\n"
           "every byte, on both sides. ratio = MPI time / strata time of the "
           "same round\n(the two measured back to back, point by point), "
           "median over rounds. push = sender copies\ninto the receiver's "
           "window; halo = sender copies "
           "into its own window, receiver\nreads it there (strata_halo_"
           "forward's scheme). bare = MPI call alone. Target:\nratio >= %.1f "
           "everywhere, >= %.1f at >= 1 MiB.\n",
           opt->quick ? "quick" : "full", opt->rounds,
           opt->rounds > 1 ? "s" : "", TARGET_ALL, TARGET_BIG);
    printf("  %5s %4s %7s %5s | %9s %7s %6s | %9s %7s %6s | %9s %7s | %9s "
           "%7s\n",
           "ranks", "pat", "B/nbr", "iters", "push us", "GB/s", "ratio",
           "halo us", "GB/s", "ratio", "MPI us", "GB/s", "bare us", "GB/s");
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                const struct point *pt = &r->p[i][p][s];
                bool m = r->mpi_ok[i];

                printf("  %5d %4s %7s %5d |", chip_counts[i], pat_names[p],
                       size_name(sizes[s]), pt->iters);
                for (int k = 0; k < NUM_MODE; k++) {
                    printf(" %9.2f %7.2f ", pt->us[k],
                           gbps(p, sizes[s], pt->us[k]));
                    if (m)
                        printf("%5.2f%s|", pt->ratio[k],
                               pt->ratio[k] >= target_for(s) ? " " : "!");
                    else
                        printf("%6s |", "-");
                }
                if (m)
                    printf(" %9.2f %7.2f | %9.2f %7.2f\n", pt->mpi_us,
                           gbps(p, sizes[s], pt->mpi_us), pt->mpi_bare_us,
                           gbps(p, sizes[s], pt->mpi_bare_us));
                else
                    printf(" %9s %7s | %9s %7s\n", "-", "-", "-", "-");
            }
    printf("! = below target. %s\n",
           "4 ranks oversubscribe the 2 cores (both sides).");
    printf("placement: %s\n",
           mpi_launch_pinned()
               ? "2 ranks pinned one per core, both sides (STRATA_PIN=1; MPI "
                 "--bind-to core); 4 ranks not bound"
               : "not bound, both sides (MPI --bind-to none; STRATA_PIN=1 "
                 "binds 2 ranks)");
    if (opt->rounds > 1)
        print_rounds(opt, rounds);
    bench_print_load(r->other_cpu_pct);
    if (r->mpi_note[0] != '\0')
        printf("NOTE: %s; reference is null and pass is false\n", r->mpi_note);
}

void print_json(const struct options *opt, const struct results *r,
                const char *error)
{
    const struct point *h = &r->p[HEAD_N][HEAD_P][HEAD_S];
    bool mpi = error == NULL && r->mpi_ok[0] && r->mpi_ok[1];
    double s_bw = error ? -1 : gbps(HEAD_P, sizes[HEAD_S], h->us[HEAD_MODE]);
    double m_bw = mpi ? gbps(HEAD_P, sizes[HEAD_S], h->mpi_us) : -1;
    double min_all[NUM_MODE] = {-1, -1}, min_big[NUM_MODE] = {-1, -1};
    bool pass[NUM_MODE] = {false, false};

    for (int m = 0; m < NUM_MODE && mpi; m++)
        pass[m] = mode_passes(r, m, &min_all[m], &min_big[m]);
    printf("{\"bench\":\"halo_exchange\",\"metric\":\"GBps_ring_1MiB_per_"
           "neighbour_2ranks_halo\",\"unit\":\"GB/s\",");
    bench_json_num("strata", s_bw, true);
    printf("\"reference_name\":\"MPI_Neighbor_alltoallv_ring_2ranks_"
           "OpenMPI\",");
    bench_json_num("reference", m_bw, true);
    bench_json_num("ratio", mpi ? h->ratio[HEAD_MODE] : -1, true);
    bench_json_num("target", mpi ? TARGET_BIG * m_bw : -1, true);
    printf("\"pass\":%s,", pass[HEAD_MODE] ? "true" : "false");
    printf("\"target_rule\":\"ratio >= 1.0 at every size, >= 1.5 at >= 1 MiB, "
           "both patterns, 2 and 4 ranks\",");
    printf("\"ratio_rule\":\"paired per round: MPI time / strata time of "
           "the same point measured back to back, median over rounds\",");
    for (int m = 0; m < NUM_MODE; m++) {
        char key[48];

        snprintf(key, sizeof(key), "min_ratio_below_1MiB_%s", mode_names[m]);
        bench_json_num(key, min_all[m], true);
        snprintf(key, sizeof(key), "min_ratio_from_1MiB_%s", mode_names[m]);
        bench_json_num(key, min_big[m], true);
        printf("\"pass_%s\":%s,", mode_names[m], pass[m] ? "true" : "false");
    }
    printf("\"points\":[");
    for (int i = 0; i < NUM_N; i++)
        for (int p = 0; p < NUM_PAT; p++)
            for (int s = 0; s < NUM_SIZES; s++) {
                const struct point *pt = &r->p[i][p][s];
                bool m = mpi && r->mpi_ok[i];

                printf("%s{\"ranks\":%d,\"pattern\":\"%s\",\"bytes_per_"
                       "neighbour\":%zu,\"iters\":%d,",
                       i + p + s ? "," : "", chip_counts[i], pat_names[p],
                       sizes[s], pt->iters);
                for (int k = 0; k < NUM_MODE; k++) {
                    char key[32];

                    snprintf(key, sizeof(key), "%s_us", mode_names[k]);
                    bench_json_num(key, pt->us[k], true);
                    snprintf(key, sizeof(key), "%s_GBps", mode_names[k]);
                    bench_json_num(key, gbps(p, sizes[s], pt->us[k]), true);
                    snprintf(key, sizeof(key), "%s_ratio", mode_names[k]);
                    bench_json_num(key, m ? pt->ratio[k] : -1, true);
                }
                bench_json_num("mpi_us", m ? pt->mpi_us : -1, true);
                bench_json_num("mpi_GBps",
                               m ? gbps(p, sizes[s], pt->mpi_us) : -1, true);
                bench_json_num("mpi_bare_us", m ? pt->mpi_bare_us : -1, true);
                bench_json_num("ratio_halo_vs_bare", m ? pt->bare_ratio : -1,
                               false);
                printf("}");
            }
    printf("],");
    bench_json_num("other_cpu_pct", r->other_cpu_pct, true);
    printf("\"rounds\":%d,\"reps\":%d,\"quick\":%s,\"pinned\":%s", opt->rounds,
           opt->reps, opt->quick ? "true" : "false",
           mpi_launch_pinned() ? "true" : "false");
    bench_json_end(r->mpi_note, error);
}
