/* The round trip of a cache line between two CPUs: one thread on each, taking turns to write
 * a shared counter (benchmarks/core_latency.py). Cores that share a cache answer in tens of
 * nanoseconds; cores apart (another CCX, another socket: where a VM's host may run its vCPUs)
 * in hundreds, and every loop whose data one core wrote and the other reads pays for it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static _Atomic long turn __attribute__((aligned(64)));

struct partner {
    int cpu;
    long iterations;
    int pinned;
};

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static void *answer(void *arg) {
    struct partner *p = arg;
    p->pinned = pin(p->cpu);
    for (long i = 0; i < p->iterations; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
    }
    return 0;
}

/* Nanoseconds per round trip between `cpu_a` (this thread, pinned for the call) and `cpu_b`;
 * -1 when either CPU cannot be pinned or the thread cannot start. */
double tvmc_core_round_trip_ns(int cpu_a, int cpu_b, long iterations) {
    cpu_set_t before;
    if (pthread_getaffinity_np(pthread_self(), sizeof before, &before) != 0 || !pin(cpu_a))
        return -1;
    atomic_store(&turn, 0);
    struct partner p = {cpu_b, iterations, 0};
    pthread_t thread;
    if (pthread_create(&thread, 0, answer, &p) != 0) {
        pthread_setaffinity_np(pthread_self(), sizeof before, &before);
        return -1;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < iterations; i++) {
        atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    pthread_join(thread, 0);
    pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    if (!p.pinned)
        return -1;
    return ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / iterations;
}
