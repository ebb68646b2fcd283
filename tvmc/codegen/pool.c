/* The thread pool generated code runs its parallel loops on (built by tvmc/codegen/pool.py).
 *
 * tvmc_parallel_for(body, closure, extent, nthreads) runs body(closure, begin, end) over chunks
 * covering [0, extent). Built for a machine shared with other work:
 * - the calling thread works too, and starts at once instead of waiting for workers to wake;
 * - chunks are claimed dynamically, so a worker that wakes late finds nothing left instead of
 *   holding everyone: the caller waits only for chunks already claimed;
 * - each thread owns a contiguous range of a loop's chunks and runs it from the front before it
 *   takes chunks from the back of the others' ranges: consecutive loops split alike give each
 *   core the same part of the data (what it wrote, it reads back from its own cache; run-to-run
 *   a ticket shared by all interleaved the parts, and was 2-4% slower end to end);
 * - a loop runs in CHUNKS_PER_THREAD chunks per thread, more (up to MAX_CHUNKS_PER_THREAD)
 *   where the caller's share of its last run lasted long enough for each still to take
 *   MIN_CHUNK_NS: a thread that ends first waits at most about one chunk for the other, so
 *   long loops end closer together, while a loop of a few microseconds keeps its few claims;
 * - idle workers spin for a short, bounded time (back-to-back loops of one inference reuse
 *   them hot), then sleep on a futex; at once where the thread they wait for was last seen on
 *   their own CPU, since it cannot run there while they spin;
 * - workers ask the kernel for a short time slice (EEVDF, Linux 6.12 on; older kernels ignore
 *   it): woken for a loop beside busy neighbours, a worker then runs at once instead of
 *   queueing behind a neighbour's longer slice (its share of the CPU stays the same);
 * - one loop at a time uses the workers: a second caller (another executor on another Python
 *   thread, or a nested loop) runs its loop on its own thread instead of queueing.
 * A job's fields are written while every range is empty and read by workers seqlock-style: a
 * claim (a compare-and-swap on a range word) succeeds only if the word still carries the
 * generation read before the fields, so a late worker can never run a chunk of a job it did
 * not read.
 * $TVMC_THREAD_POOL=gomp runs loops on libgomp instead (when built with -fopenmp).
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef void (*tvmc_body)(void *closure, int64_t begin, int64_t end);

enum { MAX_WORKERS = 255, CHUNKS_PER_THREAD = 4, MAX_CHUNKS_PER_THREAD = 16, MAX_CHUNKS = 0xffff };
/* A chunk of this long costs its claim (a compare-and-swap on a line both cores use, a call)
 * well under 1% on any core; resnet50's 1-ms convs on 2 threads then run 16 chunks a thread,
 * a transformer's few-us loops 4 (docs/performance.md, "The pool"). */
enum { MIN_CHUNK_NS = 25000, HISTORY = 256 };

static _Atomic(tvmc_body) job_body;
static _Atomic(void *) job_closure;
static _Atomic int64_t job_extent, job_chunk;
static _Atomic int32_t job_workers;     /* workers 0..job_workers-1 may take part */
static _Atomic uint32_t job_done;       /* chunks finished (a futex word) */
static _Atomic uint32_t caller_asleep;  /* the caller sleeps on job_done */
static _Atomic uint32_t wake_word;      /* bumped for each job (a futex word) */
static _Atomic int busy;                /* a caller owns the workers */

static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static int started;                     /* workers started (under grow_lock) */
static _Atomic int sleepers;            /* workers in futex_wait on wake_word */
static int64_t spin_ns = 100000;        /* $TVMC_POOL_SPIN_US */
static int64_t slice_ns = 100000;       /* $TVMC_POOL_SLICE_US; 0: the kernel's default */
static int use_gomp;                    /* $TVMC_THREAD_POOL=gomp */

/* Each participant of a job (the caller 0, workers 1..) owns a contiguous range of its chunks.
 * A range word: generation << 32 | begin << 16 | end; empty when begin >= end. Packed, not
 * a cache line each: a loop of 2 threads then moves one line between the cores, as one shared
 * ticket did (a line each cost 4% on 30-us models, whose loops are a few us). */
static _Atomic uint64_t ranges[MAX_WORKERS + 1];
static _Atomic uint32_t job_gen;        /* the generation whose ranges are open */
static _Atomic int32_t job_parts;       /* participants of the job: the caller and workers */

/* How long the caller's share of each loop body's last parallel run took (direct-mapped by
 * the body's address; read and written only by the caller that owns the workers, `busy`). */
static tvmc_body history_body[HISTORY];
static int64_t history_ns[HISTORY];
static _Atomic int64_t min_chunk_ns = MIN_CHUNK_NS;  /* tvmc_pool_set_min_chunk_us */

/* statistics and test hooks (tvmc_pool_stats, tvmc_pool_set_worker_delay) */
static _Atomic int64_t stat_loops, stat_caller_chunks, stat_worker_chunks, stat_join_ns,
    stat_serial_loops, stat_unspun_waits;
static _Atomic int64_t worker_delay_us;
static _Atomic int spin_beside_awaited;  /* test hook: spin even where the awaited thread waits */

/* The CPU each participant (the caller 0, workers 1..) last looked for a chunk on. A
 * thread waiting for one that last showed itself on the waiter's own CPU sleeps at once: that
 * one cannot run there while the waiter spins (two threads of a process placed on one core
 * beside a busy neighbour on the other: docs/performance.md, "Waiting on a shared core"). */
static _Atomic int32_t part_cpu[MAX_WORKERS + 1];

static void forget_cpus(void) {
  for (int p = 0; p <= MAX_WORKERS; p++) atomic_store(&part_cpu[p], -1);
}

static inline int waits_on_my_cpu(int p, int me) {
  return me >= 0 && atomic_load_explicit(&part_cpu[p], memory_order_relaxed) == me &&
         !atomic_load_explicit(&spin_beside_awaited, memory_order_relaxed);
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int count) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static inline int history_slot(tvmc_body body) { return (int)(((uintptr_t)body >> 4) % HISTORY); }

/* Chunks per thread for a loop of `body`: as many as its last run leaves MIN_CHUNK_NS each. */
static int64_t chunks_per_thread(tvmc_body body) {
  int slot = history_slot(body);
  if (history_body[slot] != body) return CHUNKS_PER_THREAD;
  int64_t n = history_ns[slot] / atomic_load_explicit(&min_chunk_ns, memory_order_relaxed);
  if (n < CHUNKS_PER_THREAD) return CHUNKS_PER_THREAD;
  return n > MAX_CHUNKS_PER_THREAD ? MAX_CHUNKS_PER_THREAD : n;
}

static int claim(int p, uint32_t gen, int front, int64_t *chunk) {
  for (;;) {
    uint64_t w = atomic_load(&ranges[p]);
    uint32_t begin = (w >> 16) & 0xffff, end = w & 0xffff;
    if ((uint32_t)(w >> 32) != gen || begin >= end) return 0;
    uint64_t next = front ? w + (1u << 16) : w - 1;
    if (atomic_compare_exchange_weak(&ranges[p], &w, next)) {
      *chunk = front ? begin : end - 1;
      return 1;
    }
  }
}

/* Participant p (the caller 0, workers 1..) claims and runs chunks of the open job, its own
 * range's from the front, then the others' from the back, until none is left; how many it ran. */
static int64_t run_chunks(int p) {
  int64_t ran = 0;
  for (;;) {
    uint32_t gen = atomic_load_explicit(&job_gen, memory_order_acquire);
    int32_t parts = atomic_load_explicit(&job_parts, memory_order_relaxed);
    tvmc_body body = atomic_load_explicit(&job_body, memory_order_relaxed);
    void *closure = atomic_load_explicit(&job_closure, memory_order_relaxed);
    int64_t extent = atomic_load_explicit(&job_extent, memory_order_relaxed);
    int64_t chunk = atomic_load_explicit(&job_chunk, memory_order_relaxed);
    uint32_t count = (uint32_t)((extent + chunk - 1) / chunk);
    atomic_thread_fence(memory_order_acquire);  /* the field reads happen before the claim */
    if (p >= parts) return ran;
    atomic_store_explicit(&part_cpu[p], sched_getcpu(), memory_order_relaxed);
    int64_t index;
    int got = claim(p, gen, 1, &index);
    for (int i = 1; !got && i < parts; i++) got = claim((p + i) % parts, gen, 0, &index);
    if (!got) return ran;
    int64_t begin = index * chunk, end = begin + chunk < extent ? begin + chunk : extent;
    body(closure, begin, end);
    ran++;
    if (atomic_fetch_add(&job_done, 1) + 1 == count && atomic_load(&caller_asleep))
      futex_wake(&job_done, 1);
  }
}

/* sched_attr's first fields (its layout since Linux 3.14): for SCHED_OTHER and SCHED_BATCH
 * threads, Linux 6.12 on reads sched_runtime as the slice asked for (0.1-100 ms; 0: default). */
struct slice_attr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

/* Asks for a `ns`-long slice for the calling thread, keeping its policy and nice; real-time
 * and idle threads are left as they are, and a kernel or sandbox that refuses is ignored. */
static void ask_for_slice(int64_t ns) {
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
  struct slice_attr attr;
  memset(&attr, 0, sizeof attr);
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return;
  if (attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH) return;
  attr.size = sizeof attr;
  attr.flags &= 1;  /* SCHED_FLAG_RESET_ON_FORK, the only flag of these fields */
  attr.runtime = (uint64_t)ns;
  attr.deadline = attr.period = 0;
  syscall(SYS_sched_setattr, 0, &attr, 0);
#else
  (void)ns;
#endif
}

static void *worker_main(void *arg) {
  int32_t id = (int32_t)(intptr_t)arg;
  if (slice_ns > 0) ask_for_slice(slice_ns);
  uint32_t seen = atomic_load(&wake_word);
  for (;;) {
    int64_t until = now_ns() + spin_ns;
    int me = sched_getcpu();
    uint32_t w;
    while ((w = atomic_load(&wake_word)) == seen) {
      int spinning = now_ns() < until, here = waits_on_my_cpu(0, me);  /* the next job's poster */
      if (spinning && !here) {
        for (int i = 0; i < 64; i++) cpu_relax();
        continue;
      }
      if (spinning) atomic_fetch_add_explicit(&stat_unspun_waits, 1, memory_order_relaxed);
      atomic_fetch_add(&sleepers, 1);
      futex_wait(&wake_word, seen);
      atomic_fetch_sub(&sleepers, 1);
    }
    seen = w;
    if (id >= atomic_load(&job_workers)) continue;
    int64_t delay = atomic_load(&worker_delay_us);
    if (delay) usleep((useconds_t)delay);
    int64_t ran = run_chunks(id + 1);
    if (ran) atomic_fetch_add_explicit(&stat_worker_chunks, ran, memory_order_relaxed);
  }
  return NULL;
}

/* Starts workers up to `wanted`; fewer if the system refuses threads (the caller copes). */
static int ensure_workers(int wanted) {
  if (wanted > MAX_WORKERS) wanted = MAX_WORKERS;
  pthread_mutex_lock(&grow_lock);
  while (started < wanted) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&th, &attr, worker_main, (void *)(intptr_t)started);
    pthread_attr_destroy(&attr);
    if (failed) break;
    pthread_setname_np(th, "tvmc-pool");
    started++;
  }
  int have = started;
  pthread_mutex_unlock(&grow_lock);
  return have;
}

static void after_fork_in_child(void) {
  forget_cpus();
  started = 0;  /* the workers did not survive the fork */
  atomic_store(&sleepers, 0);
  atomic_store(&busy, 0);
  pthread_mutex_init(&grow_lock, NULL);
}

/* $name as microseconds, in ns: `fallback` where unset or not a whole number >= 0 (loaded
 * through tvmc.codegen.pool, such a value is an error before this runs), at most `most_us` (so
 * that the product cannot overflow). */
static int64_t env_us_as_ns(const char *name, int64_t fallback, long long most_us) {
  const char *text = getenv(name);
  if (!text || !*text) return fallback;
  char *end;
  long long us = strtoll(text, &end, 10);
  if (*end || us < 0) return fallback;
  return (int64_t)(us < most_us ? us : most_us) * 1000;
}

__attribute__((constructor)) static void pool_init(void) {
  spin_ns = env_us_as_ns("TVMC_POOL_SPIN_US", spin_ns, 1000000);
  slice_ns = env_us_as_ns("TVMC_POOL_SLICE_US", slice_ns, 100000);  /* the kernel's longest */
  const char *kind = getenv("TVMC_THREAD_POOL");
#ifdef _OPENMP
  use_gomp = kind && strcmp(kind, "gomp") == 0;
#else
  (void)kind;
#endif
  forget_cpus();
  pthread_atfork(NULL, NULL, after_fork_in_child);
}

#ifdef _OPENMP
static void gomp_parallel_for(tvmc_body body, void *closure, int64_t extent, int32_t nthreads) {
#pragma omp parallel num_threads(nthreads)
  {
    int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    int64_t chunk = (extent + nt - 1) / nt, begin = tid * chunk;
    int64_t end = begin + chunk < extent ? begin + chunk : extent;
    if (begin < end) body(closure, begin, end);
  }
}
#endif

void tvmc_parallel_for(tvmc_body body, void *closure, int64_t extent, int32_t nthreads) {
  if (extent <= 0) return;
#ifdef _OPENMP
  if (use_gomp) {
    gomp_parallel_for(body, closure, extent, nthreads > 0 ? nthreads : omp_get_max_threads());
    return;
  }
#endif
  int expected = 0;
  if (nthreads <= 1 || extent == 1 || !atomic_compare_exchange_strong(&busy, &expected, 1)) {
    atomic_fetch_add_explicit(&stat_serial_loops, 1, memory_order_relaxed);
    body(closure, 0, extent);  /* one thread wanted, or the workers serve another loop */
    return;
  }
  int have = ensure_workers(nthreads - 1), workers = have;
  int64_t chunks = (int64_t)nthreads * chunks_per_thread(body);
  if (chunks > extent) chunks = extent;
  if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
  int64_t chunk = (extent + chunks - 1) / chunks;
  chunks = (extent + chunk - 1) / chunk;
  if (workers > chunks - 1) workers = (int)(chunks - 1);

  /* every range of the last job is empty (all its chunks ran), so no claim can succeed while
   * the fields are written; then the ranges open under the new generation */
  uint32_t gen = atomic_load(&job_gen) + 1;
  int parts = workers + 1;
  atomic_store_explicit(&job_body, body, memory_order_relaxed);
  atomic_store_explicit(&job_closure, closure, memory_order_relaxed);
  atomic_store_explicit(&job_extent, extent, memory_order_relaxed);
  atomic_store_explicit(&job_chunk, chunk, memory_order_relaxed);
  atomic_store_explicit(&job_workers, workers, memory_order_relaxed);
  atomic_store_explicit(&job_parts, parts, memory_order_relaxed);
  atomic_store(&job_done, 0);
  for (int p = 0; p < parts; p++) {
    uint64_t begin = (uint64_t)(chunks * p / parts), end = (uint64_t)(chunks * (p + 1) / parts);
    atomic_store(&ranges[p], (uint64_t)gen << 32 | begin << 16 | end);
  }
  atomic_store_explicit(&job_gen, gen, memory_order_release);
  atomic_fetch_add(&wake_word, 1);
  /* sleepers beyond job_workers may take the wake-ups, so then wake them all */
  if (atomic_load(&sleepers) > 0) futex_wake(&wake_word, workers == have ? workers : INT32_MAX);

  int64_t began = now_ns();
  int64_t mine = run_chunks(0);
  int64_t start = now_ns(), until = start + spin_ns;
  int slot = history_slot(body);  /* the caller's share, not the join: a late worker's wake-up
                                     says nothing of the loop */
  history_body[slot] = body;
  history_ns[slot] = start - began;
  uint32_t done;
  int me = atomic_load_explicit(&part_cpu[0], memory_order_relaxed);  /* run_chunks' last look */
  while ((done = atomic_load(&job_done)) < (uint32_t)chunks) {
    int spinning = now_ns() < until, here = 0;  /* a worker running a chunk waits on this CPU */
    for (int q = 1; spinning && q < parts && !here; q++) here = waits_on_my_cpu(q, me);
    if (spinning && !here) {
      cpu_relax();
      continue;
    }
    if (spinning) atomic_fetch_add_explicit(&stat_unspun_waits, 1, memory_order_relaxed);
    atomic_store(&caller_asleep, 1);
    if ((done = atomic_load(&job_done)) < (uint32_t)chunks) futex_wait(&job_done, done);
    atomic_store(&caller_asleep, 0);
  }
  atomic_fetch_add_explicit(&stat_join_ns, now_ns() - start, memory_order_relaxed);
  atomic_fetch_add_explicit(&stat_caller_chunks, mine, memory_order_relaxed);
  atomic_fetch_add_explicit(&stat_loops, 1, memory_order_relaxed);
  atomic_store(&busy, 0);
}

/* out: parallel loops, chunks run by callers, chunks run by workers, ns callers waited at the
 * join, loops run serially (one thread or workers busy), workers started, waits that slept
 * without spinning (the awaited thread was on the waiter's CPU) */
void tvmc_pool_stats(int64_t out[7]) {
  out[0] = atomic_load(&stat_loops);
  out[1] = atomic_load(&stat_caller_chunks);
  out[2] = atomic_load(&stat_worker_chunks);
  out[3] = atomic_load(&stat_join_ns);
  out[4] = atomic_load(&stat_serial_loops);
  pthread_mutex_lock(&grow_lock);
  out[5] = started;
  pthread_mutex_unlock(&grow_lock);
  out[6] = atomic_load(&stat_unspun_waits);
}

/* Test hook: the time a chunk should last at least (us > 0), else MIN_CHUNK_NS again. */
void tvmc_pool_set_min_chunk_us(int64_t us) {
  atomic_store(&min_chunk_ns, us > 0 ? us * 1000 : MIN_CHUNK_NS);
}

/* Test hook: every worker sleeps `us` microseconds before claiming chunks (a late worker). */
void tvmc_pool_set_worker_delay(int64_t us) { atomic_store(&worker_delay_us, us); }

/* Test hook: 1 makes threads spin even while the thread they wait for waits on their CPU. */
void tvmc_pool_set_spin_beside_awaited(int32_t on) { atomic_store(&spin_beside_awaited, on); }

/* 1 when loops run on libgomp ($TVMC_THREAD_POOL=gomp and built with OpenMP). */
int tvmc_pool_uses_gomp(void) { return use_gomp; }
