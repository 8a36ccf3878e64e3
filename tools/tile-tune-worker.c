/* tile-tune-worker: the process in which libtileRT's tuner runs the candidates of a
 * tuning job, so that one that faults or hangs takes only this process down
 * (runtime/rt_tune_worker.c, docs/TUNING.md). Started by the tuner, not by people. */
int rt_tune_worker_main(int argc, char **argv);

int main(int argc, char **argv)
{
    return rt_tune_worker_main(argc, argv);
}
