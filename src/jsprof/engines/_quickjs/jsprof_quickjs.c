/*
 * jsprof._quickjs: QuickJS-ng embedded in Python, with a sampling profiler.
 *
 * We #include quickjs.c (patched at build time, see quickjs.patch) to reach the
 * interpreter's internals: the stack frame chain, the interrupt counter, the bytecode's
 * pc-to-line table.
 *
 * Sampler design (measured in docs/engines.md):
 *  - One sampler per runtime. A timer thread wakes at each interval ("due time") on an
 *    absolute CLOCK_MONOTONIC grid. If the runtime is running JavaScript it marks a tick
 *    pending and zeroes every context's interrupt counter, so the interpreter calls our
 *    interrupt handler at its next poll (function entry or backward jump). If the runtime
 *    is idle (not inside JS: event loop waiting, or Python doing other work) the timer
 *    thread records an empty sample itself.
 *  - The interrupt handler (owner thread) walks rt->current_stack_frame and appends raw
 *    (function object, pc) pairs into preallocated buffers: no allocation, no strings, no
 *    JS calls. Stacks are delta-encoded against the previous captured stack (common
 *    root prefix kept), so an hour at 1 ms fits in a few hundred MB of *virtual* memory
 *    (mmap'ed lazily). Each stored function is ref-counted so it stays alive until drained.
 *  - A function with no loop and no call polls nowhere of its own: the patch calls
 *    JSPROF_FRAME_EXIT when a bytecode frame is left, one load of the poll counter; while
 *    a tick is due or about to be (the counter at 0) the tick is taken there, with the
 *    returning frame on the stack (see sampler_approach). On the wall clock it also looks
 *    when the thread was descheduled since its last look (rseq: JSPROF_RESUMED). On the
 *    CPU clock, near a due time, polls and frame exits compare the tick counter with it
 *    inline, and each such look moves it on by its own cost (JSPROF_POLL_SKIP).
 *  - Built-in (C) functions never poll. The patch calls JSPROF_NATIVE_RETURN when a C
 *    function returns; if a tick came due meanwhile (counter <= 0 and ticks pending) we
 *    capture right there, where the stack is the JS caller's: time in JSON.parse/sort/
 *    regex is charged to the function that called it, not to whatever runs next.
 *    Inside a built-in that calls back (a `replace` with a function), its C work between
 *    two callbacks has no return of its own: the long part of it, a big buffer's growth
 *    (JSPROF_REALLOCATED), looks at the clock where it ends, with the built-in's stack.
 *  - A garbage collection (JS_RunGC) polls nowhere either: JSPROF_GC looks at the clock
 *    where it starts and where it ends; its ticks are samples with no stack and the `gc`
 *    marker, V8's "(garbage collector)" (see jsprof_gc).
 *  - Draining (owner thread) symbolises: names via the closure's own `name` data property,
 *    files, lines and columns via the bytecode, and interns stacks into a (parent, func)
 *    trie. Python gets flat arrays.
 *  - Several profiler sessions (issue 4) will share this one sampler: the interval can be
 *    changed while running (sampler_set_interval) and drain() can be called repeatedly;
 *    each drain returns only new samples, so a session layer can fan them out.
 *  - The CPU clock (sampler_start's `cpu`): the grid is on the runtime's CPU time instead,
 *    the CPU time of the thread running its eval (pthread_getcpuclockid) summed over the
 *    stretches it runs (not idle, inside eval), so machine load and the event loop's waits
 *    make no ticks. No new wake-ups: the tick can be due no earlier than the remaining CPU
 *    time from now in wall time, so `next_due` becomes that lower bound and every wall-clock
 *    check above (self-sampling deadline, built-in returns, timer thread) reads the CPU
 *    clock only once it has passed, and moves it on when the thread was preempted meanwhile.
 *    Each sample also carries its tick's CPU time (`cpu`), from which the session layer
 *    weighs it; its timestamp stays on the wall clock (an estimate between two readings).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* A cheap monotonic tick counter for the hot paths (the TSC, or the ARM virtual counter);
   converted to ms with a rate calibrated once against CLOCK_MONOTONIC. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define JSPROF_TICKS_NS 0
static inline uint64_t jsprof_ticks(void) { return __rdtsc(); }
#elif defined(__aarch64__)
#define JSPROF_TICKS_NS 0
static inline uint64_t jsprof_ticks(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
#define JSPROF_TICKS_NS 1
static inline uint64_t jsprof_ticks(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
#endif

/* The first member of a runtime's host (its JS_GetRuntimeOpaque): the few fields the
   interpreter's hooks read on every poll reset and every built-in return. Written by the
   owner thread and, under the sampler lock, the timer thread: racy reads are benign (a
   stale deadline delays one sample by at most one poll period). */
typedef struct JsprofHot {
    /* polls between interrupt-handler calls (0: QuickJS's; -1: every poll, and every
       frame exit looks too: a tick is about to come due, see sampler_approach) */
    int counter_init;
    volatile int armed;         /* self-sampling: check `deadline` where built-ins return */
    volatile uint64_t deadline; /* jsprof_ticks() at which the next tick is due */
    /* the wall clock, self-sampling, rseq at hand: frame exits also look at the clock
       when the thread was descheduled since the last look (JSPROF_RESUMED) */
    volatile int watch;
} JsprofHot;

/* Has the running thread been descheduled (or signalled, or moved to another CPU) since
   its last look at the clock? The kernel's restartable sequences (rseq, registered for
   every thread by glibc >= 2.35) answer it for one load: at each look the thread points
   its rseq area's rseq_cs at a descriptor of an empty critical section (jsprof_rseq_cs),
   and whenever the kernel switches the thread out it checks, on the way back to user
   space, whether it was inside that section, and clears the pointer as it is not. So 0
   means "it stopped running since it armed", however briefly. g_rseq_cs_off: from the
   thread pointer to the rseq_cs field; 0 until rseq_init found it working (then `watch`
   stays 0). */
static long g_rseq_cs_off;
#if defined(__x86_64__)
#define JSPROF_TP_LOAD64(off)                                                          \
    __extension__({                                                                    \
        uint64_t v_;                                                                   \
        __asm__ __volatile__("movq %%fs:(%1), %0" : "=r"(v_) : "r"(off));              \
        v_;                                                                            \
    })
#else
#define JSPROF_TP_LOAD64(off)                                                          \
    (*(volatile uint64_t *)((char *)__builtin_thread_pointer() + (off)))
#endif
#define JSPROF_RESUMED(ctx)                                                            \
    ((ctx)->rt->user_opaque && ((JsprofHot *)(ctx)->rt->user_opaque)->watch &&         \
     JSPROF_TP_LOAD64(g_rseq_cs_off) == 0)

struct JSContext;
static void jsprof_native_return(struct JSContext *ctx);
/* The CPU clock, the last microseconds before a due time (sampler_approach's window,
   where the handler would run at every poll): a poll whose countdown ended compares the
   tick counter with the due time itself and calls the handler only once it has passed.
   The handler's call at every poll there (the pace, the next count: ~25 ns, against the
   native sort's ~11 ns between two comparator calls) put its cost between the
   comparator's last look and the caller's: near each due time, exactly where the ticks
   fall, callers ran longer than they do unprofiled (issue 32). Each look there moves
   the due time on by its own cost (jsprof_look, calibrated: calibrate_look), so the tick
   falls on the script's time without the looks': at both ends of every call, they are
   twice the ~11 ns a native sort spends between two comparator calls. At most by the
   window's length in all (jsprof_due_max): a calibration above a look's real cost
   could otherwise move it on faster than a tight loop's polls reach it */
static inline uint64_t jsprof_looked(uint64_t *due, uint64_t look, uint64_t max)
{
    uint64_t d = *due + look;
    return *due = d < max ? d : max;
}
#define JSPROF_POLL_SKIP(ctx)                                                          \
    ((ctx)->jsprof_look != 0 &&                                                        \
     jsprof_ticks() < jsprof_looked(&(ctx)->jsprof_due, (ctx)->jsprof_look,            \
                                    (ctx)->jsprof_due_max))
/* polls between interrupt-handler calls: QuickJS's own 10,000 unless a sampler runs */
#define JS_INTERRUPT_COUNTER_INIT                                                      \
    (ctx->rt->user_opaque && ((JsprofHot *)ctx->rt->user_opaque)->counter_init != 0    \
         ? (((JsprofHot *)ctx->rt->user_opaque)->counter_init > 0                      \
                ? ((JsprofHot *)ctx->rt->user_opaque)->counter_init                    \
                : 0)                                                                   \
         : 10000)
/* a built-in returned to its caller: take the ticks that came due meanwhile (the timer
   thread zeroed the counter, or, self-sampling, the deadline passed) with the caller's
   stack */
#define JSPROF_NATIVE_RETURN(ctx)                                                      \
    do {                                                                               \
        JsprofHot *hot_ = (JsprofHot *)(ctx)->rt->user_opaque;                         \
        if (__builtin_expect((ctx)->interrupt_counter <= 0, 0)                         \
                ? !JSPROF_POLL_SKIP(ctx)                                               \
                : (hot_ && hot_->armed &&                                              \
                   __builtin_expect(jsprof_ticks() >= hot_->deadline, 0)))             \
            jsprof_native_return(ctx);                                                 \
    } while (0)

/* freeing a big structure (the result of a JSON.parse dropped) polls nowhere: take the
   ticks that came due meanwhile with the stack of the frame that drops it */
struct JSRuntime;
static void jsprof_freeing(struct JSRuntime *rt);
#define JSPROF_FREEING(rt) jsprof_freeing(rt)

/* growing a big buffer (the string a `replace` or a `join` builds, an array's storage)
   copies it, into fresh pages: milliseconds that poll nowhere, in the built-in that
   builds it. Take the ticks that came due meanwhile there, with the built-in's caller's
   stack: left to the next check, they went to whatever ran next, inside a `replace`
   the callback's first built-in return (see jsprof_reallocated) */
#define JSPROF_BIG_REALLOC (256 * 1024)
static void jsprof_reallocated(struct JSRuntime *rt);
#define JSPROF_REALLOCATED(rt, size)                                                   \
    do {                                                                               \
        if (__builtin_expect((size) >= JSPROF_BIG_REALLOC, 0))                         \
            jsprof_reallocated(rt);                                                    \
    } while (0)

/* a bytecode function's frame is left (return, throw, await): while a tick is due or
   about to be (the poll counter at or below 0: the timer thread zeroed it, or the
   interpreter asked for every poll, see sampler_approach), take it here, with this
   frame still on the stack. Otherwise one load: a function with no loop and no call
   polls nowhere of its own (its entry's poll runs before its frame exists), so without
   this its time went to whatever polled next, mostly its caller. */
static void jsprof_frame_exit(struct JSContext *ctx);
/* The CPU clock, the approach's last counts and its window (sampler_set_cadence): the
   context's exit_due is the due time, compared here inline, so frame exits look without
   a call and the counter at 0 calls out only once it has passed. Otherwise 0: one load
   from the context (not two through the runtime's opaque) */
#define JSPROF_FRAME_EXIT(ctx, sf, pc)                                                 \
    do {                                                                               \
        uint64_t due_ = (ctx)->jsprof_due;                                             \
        if (__builtin_expect(due_ != 0 ? jsprof_ticks() >=                             \
                                             jsprof_looked(&(ctx)->jsprof_due,         \
                                                           (ctx)->jsprof_look,         \
                                                           (ctx)->jsprof_due_max)      \
                                       : (ctx)->interrupt_counter <= 0, 0) ||          \
            __builtin_expect(JSPROF_RESUMED(ctx), 0)) {                                \
            (sf)->cur_pc = (pc);                                                       \
            jsprof_frame_exit(ctx);                                                    \
        }                                                                              \
    } while (0)

/* a garbage collection (JS_RunGC) starts (begin = 1) or ends (0): ticks due before it
   are taken with the allocating frame's stack, those due during it as the collector's
   (see jsprof_gc). Collections are rare (QuickJS's threshold is 1.5x the memory in use
   after the last one): nothing on the interpreter's hot paths */
static void jsprof_gc(struct JSRuntime *rt, int begin);
#define JSPROF_GC(rt, begin) jsprof_gc(rt, begin)

#include "quickjs.c"

/* ------------------------------------------------------------------------- clocks */

static inline double mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    /* same clock and formula as quickjs-ng's performance.now() (js__hrtime_ns) */
    return (double)((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) / 1e6;
}

static inline double real_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void ms_to_timespec(double ms, struct timespec *ts)
{
    double sec = ms / 1e3;
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)((sec - (double)ts->tv_sec) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
    if (ts->tv_nsec < 0)
        ts->tv_nsec = 0;
}

/* ------------------------------------------------------------------------- rseq */

#if defined(__linux__) && defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <dlfcn.h>
#include <stddef.h>
#include <sys/rseq.h>
#endif
#endif
#if defined(RSEQ_SIG) && (defined(__x86_64__) || defined(__aarch64__))
#define JSPROF_HAVE_RSEQ 1
/* The descriptor JSPROF_RESUMED arms: an empty critical section (no instruction is in
   it, so the kernel never aborts anything, it only clears the pointer), its abort
   address just after the signature the kernel checks there (glibc registers each
   thread's rseq with RSEQ_SIG; a descriptor without it would get the thread killed). */
static const uint32_t jsprof_rseq_sig[2] __attribute__((aligned(8))) = {RSEQ_SIG, 0};
static const struct rseq_cs jsprof_rseq_cs = {
    .version = 0,
    .flags = 0,
    .start_ip = (uintptr_t)&jsprof_rseq_sig[1],
    .post_commit_offset = 0,
    .abort_ip = (uintptr_t)&jsprof_rseq_sig[1],
};
#endif
static pthread_once_t g_rseq_once = PTHREAD_ONCE_INIT;
/* 0: frame exits never look because of a deschedule (benchmarks compare); set_watch */
static int g_watch = 1;

/* the running thread looks at the clock now: a later deschedule clears this again */
static inline void rseq_arm(void)
{
#ifdef JSPROF_HAVE_RSEQ
    if (g_rseq_cs_off)
        *(volatile uint64_t *)((char *)__builtin_thread_pointer() + g_rseq_cs_off) =
            (uint64_t)(uintptr_t)&jsprof_rseq_cs;
#endif
}

/* Once a process: find this thread's rseq area (glibc's __rseq_offset, __rseq_size: 0
   when glibc did not register it) and check that the kernel clears an armed pointer when
   the thread sleeps (20 us, up to 3 times). Otherwise g_rseq_cs_off stays 0: the wall
   clock then samples as it did without it (a look every 1,000 polls). */
static void rseq_init(void)
{
#ifdef JSPROF_HAVE_RSEQ
    const ptrdiff_t *off = dlsym(RTLD_DEFAULT, "__rseq_offset");
    const unsigned int *size = dlsym(RTLD_DEFAULT, "__rseq_size");
    volatile uint64_t *p;
    long o;
    if (!off || !size || *size < offsetof(struct rseq, rseq_cs) + sizeof(uint64_t))
        return;
    o = (long)*off + (long)offsetof(struct rseq, rseq_cs);
    if (o == 0)
        return;
    p = (volatile uint64_t *)((char *)__builtin_thread_pointer() + o);
    *p = (uint64_t)(uintptr_t)&jsprof_rseq_cs;
    for (int i = 0; i < 3 && *p != 0; i++) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    if (*p == 0)
        g_rseq_cs_off = o;
    else
        *p = 0;
#endif
}

/* ------------------------------------------------------------------------- sampler */

#define SAMPLE_IDLE 0x80000000u     /* no JS on the stack */
#define SAMPLE_DEFERRED 0x40000000u /* tick came due before the capture point (native call) */
#define SAMPLE_NATIVE 0x20000000u   /* captured when a built-in returned */
#define SAMPLE_GC 0x10000000u       /* due during a garbage collection: no stack (jsprof_gc) */
#define SAMPLE_NNEW_MASK 0x0fffffffu
#define MAX_DEPTH 16384
#define SELF_SAMPLE_COUNTER_INIT 1000
/* the walker's depth limit: MAX_DEPTH, lowered by tests through _quickjs.set_max_depth */
static uint32_t g_max_depth = MAX_DEPTH;
#define STALL_MAX_TICKS 1000
/* The most samples one sampler_start may ask room for (what the session layer clamps
   to: 74 h at 1 ms). Checked here whatever Python passes: (capacity + 1) * sizeof
   (RawSample) and the frame buffer's size must not wrap, and raw frames and trie nodes
   are indexed with int32 when drained. */
#define MAX_CAPACITY ((Py_ssize_t)1 << 28)
#define MAX_RAW_FRAMES ((size_t)INT32_MAX - 1)
/* Self-sampling (the default for every interval; _quickjs.set_tuning switches it off for
   benchmarks): the timer thread's wake-ups cost ~20-25 us each on a VM, i.e. +20-25 % CPU
   at 0.1 ms, so the interpreter samples itself instead: its interrupt handler runs every
   1,000 polls and compares a cheap tick counter with the next due time, and so does every
   built-in's return to bytecode (JSPROF_NATIVE_RETURN), so ticks due inside a built-in
   call, however short, are charged to its JavaScript caller. The timer thread then wakes
   only every g_self_wake_ms: idle ticks are also registered when the event loop goes to
   sleep and wakes (host_set_idle), so it only bounds how late they are recorded. Its
   wake-ups are per wall-clock millisecond, so on a loaded machine, where the script gets
   a fraction of a core, 1,000 a second cost several % of the script's CPU. */
static double g_self_below_ms = 1e300; /* self-sample below this interval */
static double g_self_wake_ms = 20.0;   /* then the timer thread wakes this often */
static double g_ticks_per_ms;          /* jsprof_ticks() rate; 0 until calibrated */
#define MAX_CTX 16

typedef struct {
    double due;        /* when the tick was due (performance.now() ms) */
    double cap;        /* when the stack was captured */
    double cpu;        /* CPU clock: the tick's runtime CPU ms (0 on the wall clock) */
    uint32_t keep;     /* frames kept from the previous captured stack (root first) */
    uint32_t nnew;     /* new frames appended + flags */
} RawSample;

typedef struct {
    JSObject *fn;
    uint32_t pc;
} RawFrame;

typedef struct Sampler {
    JsprofHot *hot; /* the interpreter-facing fields (first member of the Host) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int thread_started;
    int running;          /* under lock */
    double interval_ms;   /* under lock */
    int interval_changed; /* under lock */

    RawSample *samples;
    size_t nsamples, cap_samples, map_samples;
    RawFrame *frames;
    size_t nframes, cap_frames, map_frames;
    /* drain swaps the raw buffers with these under the lock and symbolises the old ones
       after unlocking (owner thread only) */
    RawSample *spare_samples;
    RawFrame *spare_frames;
    int draining;
    RawFrame *walk, *prev;
    uint32_t prev_depth;

    atomic_int pending; /* ticks due, not yet captured */
    int gc;             /* owner thread: in a garbage collection begun under JS (jsprof_gc) */
    double pending_first_due, pending_last_due;
    int idle;           /* under lock: runtime not executing JS */
    /* Script window (`jsprof record`): the recording holds the script, from just before
       its first instruction to the end of its last job, the event loop's waits included,
       and not the embedder's own work around it (making the runtime, reading the file,
       Python's shutdown). While `held`, ticks pass on the grid unrecorded; host_eval
       lets go at its start and holds again at its end. Both under lock. */
    int window;
    int held;
    int full;
    uint64_t dropped;         /* ticks lost: buffer full, or beyond the stall cap */
    uint64_t stall_dropped;   /* of which beyond the stall cap (STALL_MAX_TICKS) */
    uint64_t offcpu_dropped;  /* due while the owner thread could not run (see below) */
    /* The owner thread's last known running point (wall mode): mono ms and its CPU ms
       (CLOCK_THREAD_CPUTIME_ID) at the last capture or the last start of JS running, on
       thread `run_thread` (run_ok). A batch of ticks taken at a poll is trusted only as
       far as the thread ran since: see sampler_offcpu_locked. */
    double run_wall, run_cpu;
    pthread_t run_thread;
    int run_ok;
    uint64_t truncated;       /* stacks deeper than MAX_DEPTH (root side cut off) */
    uint64_t native_captures;
    /* The session layer (Python) asks to look at the samples once `notify_at` are held
       (0: never): the earliest any session's buffer could be full. The owner thread
       sees check_due at its next event-loop turn, never inside the sampler. */
    size_t notify_at;
    atomic_int check_due;

    JSContext *ctxs[MAX_CTX];
    int nctx;
    double time_origin_mono; /* ctx->time_origin: performance.now() == mono_ms() - this */
    double start_mono;       /* when sampler_start was called */
    double next_due;         /* under lock: mono ms of the next tick on the grid */
    /* Optional self-sampling (off by default, see g_self_below_ms): the timer thread's
       wake-ups dominate the cost at small intervals (~15 us each here), so the interpreter
       can sample itself: the handler runs every 1,000 polls (~15 us of bytecode) and takes
       due ticks with a clock read; the timer thread wakes only every g_self_wake_ms, for
       idle time and for ticks left overdue by a long built-in call. */
    int self_sample;
    /* Self-sampling's approach to the next due time (owner thread only): when the
       handler last ran (jsprof_ticks()), how many polls it let pass before the next run,
       and the ticks one poll took on average then (see sampler_approach). */
    uint64_t poll_ticks;
    int poll_count;
    double ticks_per_poll;
    double self_grace;       /* how overdue a tick must be before the handler takes it */
    double wake_slack;       /* timer thread wakes this long after a tick is due */
    /* The CPU clock (cpu = 1, fixed from sampler_start to stop). Runtime CPU ms: cpu_acc,
       plus owner_cpu's advance since cpu_enter while cpu_in. All under lock. */
    int cpu;
    clockid_t owner_cpu;     /* CPU clock of the thread running the eval (host_eval) */
    int owner_cpu_ok;
    int cpu_in;              /* the runtime runs on owner_cpu now (in eval, not idle) */
    double cpu_enter;        /* owner_cpu's reading (ms) when cpu_in began */
    double cpu_acc;          /* runtime CPU ms before that, since sampler_start */
    double cpu_next;         /* runtime CPU ms of the next tick (the end of its slot) */
    double cpu_take;         /* ... and where in its slot it is taken (sampler_jitter) */
    uint64_t rng;            /* sampler_jitter's state */
    double cpu_seen, wall_seen; /* the last reading: runtime CPU ms and mono ms */
    double pending_first_cpu, pending_last_cpu;
} Sampler;

/* ms of CPU a thread's clock says; -1 when it cannot be read (the thread is gone) */
static inline double thread_cpu_ms(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return -1;
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* lock held: the runtime's CPU ms since sampler_start */
static double runtime_cpu_locked(Sampler *s)
{
    if (s->cpu_in) {
        double t = thread_cpu_ms(s->owner_cpu);
        if (t >= s->cpu_enter)
            return s->cpu_acc + (t - s->cpu_enter);
    }
    return s->cpu_acc;
}

/* lock held: the runtime starts (in = 1) or stops (0) running on the owner's thread */
static void sampler_cpu_in_locked(Sampler *s, int in)
{
    if (!s->cpu || in == s->cpu_in)
        return;
    if (in) {
        if (!s->owner_cpu_ok)
            return;
        s->cpu_enter = thread_cpu_ms(s->owner_cpu);
        s->cpu_in = s->cpu_enter >= 0;
    } else {
        s->cpu_acc = runtime_cpu_locked(s);
        s->cpu_in = 0;
    }
}

static inline double sampler_now(Sampler *s)
{
    return mono_ms() - s->time_origin_mono;
}

static void *map_zero(size_t bytes)
{
    /* lazily committed: untouched pages cost nothing, so the default hour-long buffer is
       cheap for short runs */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* lock held */
static int sampler_push(Sampler *s, double due, double cap, double cpu, uint32_t keep,
                        uint32_t nnew)
{
    RawSample *r;
    if (s->nsamples >= s->cap_samples) {
        s->full = 1;
        s->dropped++;
        return -1;
    }
    r = &s->samples[s->nsamples++];
    if (s->notify_at && s->nsamples >= s->notify_at)
        atomic_store_explicit(&s->check_due, 1, memory_order_relaxed);
    r->due = due;
    r->cap = cap;
    r->cpu = cpu;
    r->keep = keep;
    r->nnew = nnew;
    return 0;
}

/* lock held, on the thread about to run JS (or just having captured): the baseline for
   the off-CPU time of the next batch of ticks */
static void sampler_mark_running_locked(Sampler *s, double mono, double cpu)
{
    s->run_wall = mono;
    s->run_cpu = cpu;
    s->run_thread = pthread_self();
    s->run_ok = cpu >= 0;
}

/* lock held, wall clock: of `n` pending ticks about to be taken at `mono` (cpu: the
   thread's CPU ms then), how many came due while the owner thread could not run: stopped
   (SIGSTOP, `cpulimit`) or waiting for a core (a loaded machine). Their stack is not the
   one found now. After such a stall the timer thread, not the interpreter, made them
   pending and zeroed the poll counter, so they were taken at the first poll after the
   thread ran again: when it had stopped past a comparator's last poll (or in the native
   sort), that is the next comparator call's entry, before its frame exists, where the
   stack is the caller's. Quiet, the interpreter takes its ticks itself, at the
   comparator's built-in returns. Measured (issue 32, SIGSTOP 50 ms / SIGCONT 50 ms):
   sortSync 3,267 ticks in 18 captures against cmpSync's 3,877 in 114 (CPU clock: 0
   against 51). They are counted as lost (offCpuDroppedTicks), as V8's sampler loses
   them (its signals to a descheduled thread stay one pending signal). The ticks the
   thread's CPU time covers are kept, and the first of the batch always (see
   sampler_capture_locked: the stall's gap is the resumed stack's). */
static int sampler_offcpu_locked(Sampler *s, int n, double mono, double cpu)
{
    double off, span;
    int lost;
    if (s->cpu || n <= 1 || cpu < 0 || !s->run_ok || !pthread_equal(s->run_thread, pthread_self()))
        return 0;
    off = (mono - s->run_wall) - (cpu - s->run_cpu);
    /* never more than the ticks' own span: off-CPU time before the first of them cost no
       tick of this batch */
    span = s->pending_last_due - s->pending_first_due + s->interval_ms;
    if (off > span)
        off = span;
    if (!(off >= s->interval_ms))
        return 0;
    lost = (int)floor(off / s->interval_ms);
    return lost > n - 1 ? n - 1 : lost;
}

/* lock held: `lost` of `n` pending ticks (the earliest) are dropped as off-CPU: ticks
   pending when JavaScript stops (sampler_flush_pending_idle_locked), whose stack no one
   saw, so the gap stays on the last JavaScript sample before it */
static void sampler_drop_first_locked(Sampler *s, int n, int lost)
{
    s->pending_first_due += (s->pending_last_due - s->pending_first_due) * lost / (n - 1);
    s->offcpu_dropped += (uint64_t)lost;
}

/* where a capture happens (sampler_capture_locked's `at`) */
#define CAPTURE_POLL 0   /* the interrupt handler, at a poll */
#define CAPTURE_NATIVE 1 /* a built-in's return to its JS caller */
#define CAPTURE_OTHER 2  /* freeing a big structure, the event loop, sample_now */
#define CAPTURE_RETURN 3 /* a bytecode function's frame exit (JSPROF_FRAME_EXIT) */
#define CAPTURE_AGAIN 4  /* the same point again: ticks due during the capture before */

/* lock held, owner thread, in a garbage collection: its `n` ticks, taken where it ends,
   are samples with no stack that say so (the trace's `gc` marker: V8's and so Node's
   "(garbage collector)"). The delta chain of stacks is left as it is, as for idle
   samples. Kept however long the thread waited (the collector ran all along), and on
   the CPU clock each weighs its tick's CPU time, like any other. */
static void sampler_push_gc_locked(Sampler *s, int n)
{
    double now = sampler_now(s);
    if (!s->cpu)
        sampler_mark_running_locked(s, now + s->time_origin_mono,
                                    thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID));
    for (int k = 0; k < n; k++) {
        double due = n > 1 ? s->pending_first_due +
                                 (s->pending_last_due - s->pending_first_due) * k / (n - 1)
                           : s->pending_last_due;
        double cpu = n > 1 ? s->pending_first_cpu +
                                 (s->pending_last_cpu - s->pending_first_cpu) * k / (n - 1)
                           : s->pending_last_cpu;
        if (sampler_push(s, due, now, cpu, 0, SAMPLE_GC | (k < n - 1 ? SAMPLE_DEFERRED : 0)) < 0)
            return;
    }
}

/* lock held, owner thread: record `pending` ticks with the current JS stack */
static void sampler_capture_locked(Sampler *s, JSRuntime *rt, int at)
{
    int native = at == CAPTURE_NATIVE;
    int n = atomic_exchange(&s->pending, 0);
    int skip = 0; /* the batch's ticks after its first dropped as off-CPU */
    JSStackFrame *sf;
    uint32_t d = 0, i, keep, nnew;
    double now, first, last;

    if (n <= 0 || s->full)
        return;
    if (s->gc) {
        sampler_push_gc_locked(s, n);
        return;
    }
    for (sf = rt->current_stack_frame; sf && d < g_max_depth; sf = sf->prev_frame) {
        JSObject *p;
        JSFunctionBytecode *b;
        uint32_t pc = 0;
        if (JS_VALUE_GET_TAG(sf->cur_func) != JS_TAG_OBJECT)
            continue;
        p = JS_VALUE_GET_OBJ(sf->cur_func);
        if (!js_class_has_bytecode(p->class_id))
            continue; /* built-in (C) functions are not frames */
        b = p->u.func.function_bytecode;
        if (sf->cur_pc && sf->cur_pc >= b->byte_code_buf &&
            sf->cur_pc <= b->byte_code_buf + b->byte_code_len)
            pc = (uint32_t)(sf->cur_pc - b->byte_code_buf);
        s->walk[d].fn = p;
        s->walk[d].pc = pc;
        d++;
    }
    if (sf) { /* the depth limit reached: count the samples when bytecode frames were cut */
        for (; sf; sf = sf->prev_frame) {
            if (JS_VALUE_GET_TAG(sf->cur_func) == JS_TAG_OBJECT &&
                js_class_has_bytecode(JS_VALUE_GET_OBJ(sf->cur_func)->class_id)) {
                s->truncated += (uint64_t)n;
                break;
            }
        }
    }
    if (d == 0 && !s->idle) {
        /* No JavaScript frame yet, though the runtime runs: the poll at the entry of a
           top-level call (the script, after compiling it; a job; a timer callback), or a
           built-in the host called. The ticks stay pending for the frame about to run,
           so the time is charged to it, not to no-one (a report's "(idle)"). */
        atomic_fetch_add(&s->pending, n);
        return;
    }
    now = sampler_now(s); /* the capture time: read only when the ticks are taken */
    if (!s->cpu) {
        double mono = now + s->time_origin_mono, c = thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID);
        /* only a poll's or a frame exit's stack can be one the stall did not have (the
           timer thread's poke makes the first of them after it capture, a callback's
           entry or its return among them). A built-in's return sees the stack its whole
           call had (JSON.parse, a blocking host call), and so does the freeing of a big
           structure: kept, however long the thread waited */
        skip = at == CAPTURE_POLL || at == CAPTURE_RETURN || at == CAPTURE_AGAIN
                   ? sampler_offcpu_locked(s, n, mono, c)
                   : 0;
        s->offcpu_dropped += (uint64_t)skip;
        sampler_mark_running_locked(s, mono, c);
    }
    /* walk is leaf first; compare root first against the previous stack */
    keep = 0;
    while (keep < d && keep < s->prev_depth &&
           s->prev[keep].fn == s->walk[d - 1 - keep].fn &&
           s->prev[keep].pc == s->walk[d - 1 - keep].pc)
        keep++;
    nnew = d - keep;
    if (s->nframes + nnew > s->cap_frames) {
        s->full = 1;
        s->dropped += (uint64_t)(n - skip);
        return;
    }
    for (i = keep; i < d; i++) {
        RawFrame f = s->walk[d - 1 - i];
        js_dup(JS_MKPTR(JS_TAG_OBJECT, f.fn)); /* keep it alive until drained */
        s->frames[s->nframes++] = f;
        s->prev[i] = f;
    }
    s->prev_depth = d;
    if (native)
        s->native_captures++;
    first = s->pending_first_due;
    last = s->pending_last_due;
    /* n ticks came due since the last capture point; no poll happened in between, so the
       stack at each of those due times is this one (typically: inside a built-in called
       from here). Each is stamped at its due time.
       Of a batch with off-CPU ticks (`skip`), the first is kept and the `skip` after it
       are dropped, not the earliest: a wall-clock sample weighs the gap to the next one,
       so the stall's gap is this sample's, the stack where the thread resumed, which is
       where the thread stood still (performance.now() counts the stall in the function it
       stopped in; frame exits look after a deschedule, see sampler_approach). Dropping
       the earliest put the gap on the sample before, often another function: beside busy
       loops a built-in's caller f had 0.045-0.177 more of f + g than performance.now()
       gave it, against 0.012 at most now (issue 32, tests/test_quickjs_load.py). Its
       capture waited out the stall: flagged deferred, no latency. */
    for (int k = 0; k < n - skip; k++) {
        int j = k == 0 ? 0 : k + skip; /* its place in the batch */
        double due = n > 1 ? first + (last - first) * j / (n - 1) : last;
        double cpu = n > 1 ? s->pending_first_cpu +
                                 (s->pending_last_cpu - s->pending_first_cpu) * j / (n - 1)
                           : s->pending_last_cpu;
        uint32_t flags = (j < n - 1 ? SAMPLE_DEFERRED : 0) | (native ? SAMPLE_NATIVE : 0);
        if (sampler_push(s, due, now, cpu, k == 0 ? keep : d, (k == 0 ? nnew : 0) | flags) < 0)
            return;
    }
}

/* lock held: ticks pending when JS stops running have no stack left to charge */
static void sampler_flush_pending_idle_locked(Sampler *s)
{
    int n = atomic_exchange(&s->pending, 0);
    double now = sampler_now(s);
    int lost;
    /* CPU clock: CPU the host spent outside JavaScript (its event loop between jobs) is
       no one's; it stays in the runtime's CPU time, so it weighs on no sample */
    if (s->cpu)
        return;
    /* those of them that came due while the thread could not run are lost, not idle */
    lost = sampler_offcpu_locked(s, n, now + s->time_origin_mono,
                                 thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID));
    if (lost > 0) {
        sampler_drop_first_locked(s, n, lost);
        n -= lost;
    }
    for (int k = 0; k < n; k++) {
        double due = n > 1 ? s->pending_first_due +
                                 (s->pending_last_due - s->pending_first_due) * k / (n - 1)
                           : s->pending_last_due;
        sampler_push(s, due, now, 0, 0, SAMPLE_IDLE);
    }
}

/* how long the timer thread keeps re-zeroing the counters after a tick (ms); tunable
   for benchmarks through _quickjs.set_repoke_us() */
static double g_repoke_ms = 0.001;

/* Every context's next poll reaches the interrupt handler: its countdown set to 0. A
   plain write (the interpreter's `--counter` is not atomic either); callers that must not
   lose it write again. */
static inline void sampler_poke(Sampler *s)
{
    for (int i = 0; i < s->nctx; i++) {
        /* no inline check may hold the handler back (JSPROF_POLL_SKIP) */
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_look = 0;
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_due = 0;
        *(volatile int *)&s->ctxs[i]->interrupt_counter = 0;
    }
}

/* lock held or owner thread: polls and frame exits stop comparing a due time inline (it
   is about to change, or the sampler stops); sampler_set_cadence sets them again */
static inline void sampler_clear_dues(Sampler *s)
{
    for (int i = 0; i < s->nctx; i++) {
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_look = 0;
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_due = 0;
    }
}

/* lock held: point the interpreter's deadline checks at next_due (self-sampling) */
static void sampler_arm_locked(Sampler *s)
{
    double ahead;
    sampler_clear_dues(s);
    if (!s->self_sample || !s->running || g_ticks_per_ms <= 0) {
        s->hot->armed = 0;
        s->hot->watch = 0;
        return;
    }
    /* the wall clock: a deschedule makes frame exits look (see sampler_approach) */
    s->hot->watch = !s->cpu && g_rseq_cs_off != 0 && g_watch;
    /* anchored afresh each time, so a small rate error shifts a deadline by a tiny
       fraction of one interval, never accumulates */
    ahead = (s->next_due - mono_ms()) * g_ticks_per_ms;
    s->hot->deadline = jsprof_ticks() + (uint64_t)(ahead > 0 ? ahead : 0);
    s->hot->armed = 1;
}

/* lock held: register the ticks whose due time has passed (`now` >= next_due). Every grid
   point that has passed is a tick: if nobody looked for a while (CPU contention), the
   missed ticks still count, stamped at their due times, so sample counts keep following
   wall time. Idle: recorded as empty samples right away; running: made pending for the
   owner thread to capture. Returns 1 when ticks were made pending. */
/* lock held, the CPU clock: sampler_due_locked on the runtime's CPU time. Reads the
   clock; the ticks it passed are made pending (their wall times placed between the last
   reading and this one, in proportion), and `next_due` moves to the earliest wall time at
   which the next one can come due (from when the reading returned). No stall cap: CPU time does not pass while the process
   is stopped, and the raw buffer bounds what is kept. */
#define CPU_MAX_TICKS (1 << 20)

/* Each CPU-clock tick stands for one interval of the runtime's CPU time, its slot
   (cpu_next - interval, cpu_next], and is taken at a random point of it (cpu_take), not
   at its end. On a fixed grid a script whose work repeats with a period near the
   interval (or a multiple of it) is sampled at the same point of each repetition: the
   CPU clock has no scheduling jitter to break the lock, and the grid's phase is set by
   the script window's first tick, so every run starts at nearly the same point. Two
   functions alternating every ~0.5 ms at 1 ms: `work`'s share 0.12-0.64 over 10 runs
   (mean 0.36, where both do the same work), 0.47-0.54 at 0.77 ms (issue 32); a random
   point per slot makes each sample an unbiased draw of its slot, whatever the script's
   rhythm (stratified sampling; Mytkowicz et al., PLDI 2010, on profilers' fixed
   intervals). The tick keeps its slot's end as its CPU time (`cpu`), so every sample
   still weighs one interval and the session layer's grid is unchanged. */
static double sampler_jitter(Sampler *s)
{
    /* xorshift64*: state never 0 (seeded in sampler_start) */
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* lock held: cpu_next's slot is now the next one; draw where in it its tick is taken */
static inline void sampler_draw_take(Sampler *s)
{
    s->cpu_take = s->cpu_next - s->interval_ms * sampler_jitter(s);
}

static int sampler_due_cpu_locked(Sampler *s, double now)
{
    double c = runtime_cpu_locked(s);
    double passed = 0, take_first = s->cpu_take, take_last = s->cpu_take;
    int pending = 0;
    if (c >= s->cpu_take) {
        /* the next tick, and every later one whose slot ended by now */
        passed = c >= s->cpu_next ? 1 + floor((c - s->cpu_next) / s->interval_ms) : 1;
        s->cpu_next += passed * s->interval_ms;
        if (passed > 1)
            take_last = s->cpu_next - s->interval_ms; /* a slot's end: taken by then */
        sampler_draw_take(s);
        if (c >= s->cpu_take) { /* now is inside the next slot, past its draw */
            take_last = s->cpu_take;
            passed++;
            s->cpu_next += s->interval_ms;
            sampler_draw_take(s);
        }
    }
    if (passed > 0 && !s->held && !s->full && !s->idle) {
        double span_c = c - s->cpu_seen, span_w = now - s->wall_seen;
        /* the ticks' CPU times: their slots' ends (one interval each) */
        double last_c = s->cpu_next - s->interval_ms, first_c = last_c - (passed - 1) * s->interval_ms;
        double wf = now, wl = now;
        int k = passed > CPU_MAX_TICKS ? CPU_MAX_TICKS : (int)passed;
        /* their wall times: where the CPU clock passed the points they were taken at */
        if (span_c > 0 && span_w > 0) {
            wf = s->wall_seen + (take_first - s->cpu_seen) / span_c * span_w;
            wl = s->wall_seen + (take_last - s->cpu_seen) / span_c * span_w;
            wf = wf < s->wall_seen ? s->wall_seen : wf > now ? now : wf;
            wl = wl < wf ? wf : wl > now ? now : wl;
        }
        if (k < passed) {
            s->dropped += (uint64_t)(passed - k);
            first_c = last_c - (k - 1) * s->interval_ms;
        }
        if (atomic_load(&s->pending) == 0) {
            s->pending_first_due = wf - s->time_origin_mono;
            s->pending_first_cpu = first_c;
        }
        s->pending_last_due = wl - s->time_origin_mono;
        s->pending_last_cpu = last_c;
        atomic_fetch_add(&s->pending, k);
        pending = 1;
    }
    s->cpu_seen = c;
    s->wall_seen = now;
    /* From a wall reading taken after the CPU clock's, never from `now` (before it): the
       clock read is a system call (1-3 us here), so `now` + the CPU time left put the
       next look before the tick could come due, by the read's own latency. Each look
       then found it not yet due with less than a read's worth left (half the reads on
       a sort comparator), and armed again in the past, so the tick went to the check
       after that one: the interpreter's next one, not the first after the due time. In
       a comparator, a tick found not due at its frame exit went to the next call's
       entry poll, the caller's stack (issue 32: sortSync 16-45 % of cmpSync's samples;
       perf's count of the native sort outside the comparator: 4.7 %). */
    s->next_due = mono_ms() + (s->cpu_take - c);
    sampler_arm_locked(s);
    return pending;
}

static int sampler_due_locked(Sampler *s, double now)
{
    if (s->cpu)
        return sampler_due_cpu_locked(s, now);
    double passed = 1 + floor((now - s->next_due) / s->interval_ms);
    int k = passed > STALL_MAX_TICKS ? STALL_MAX_TICKS + 1 : (int)passed;
    double first = s->next_due - s->time_origin_mono;
    double last = first + (k - 1) * s->interval_ms;
    int pending = 0;
    if (s->held) { /* outside the script window: the grid moves on, nothing recorded */
        s->next_due += passed * s->interval_ms;
        sampler_arm_locked(s);
        return 0;
    }
    if (k > STALL_MAX_TICKS) { /* a stall (suspend?) is not worth thousands of samples */
        last = first + (passed - 1) * s->interval_ms;
        s->stall_dropped += (uint64_t)(passed - STALL_MAX_TICKS);
        /* ticks still pending from before the stall are older than the cap's window too:
           kept, the capture would spread the whole pending run evenly from the first of
           them to now and hide the stall (a loaded machine leaves ticks pending for the
           owner; the gap vanished in 3 of 5 SIGSTOPs at load 10-14) */
        s->stall_dropped += (uint64_t)atomic_exchange(&s->pending, 0);
        first = last - (STALL_MAX_TICKS - 1) * s->interval_ms;
        k = STALL_MAX_TICKS;
    }
    if (!s->full) {
        if (s->idle) {
            for (int i = 0; i < k; i++)
                sampler_push(s, first + i * s->interval_ms, now - s->time_origin_mono, 0, 0,
                             SAMPLE_IDLE | (i < k - 1 ? SAMPLE_DEFERRED : 0));
        } else {
            if (atomic_load(&s->pending) == 0)
                s->pending_first_due = first;
            s->pending_last_due = last;
            s->pending_first_cpu = s->pending_last_cpu = 0;
            atomic_fetch_add(&s->pending, k);
            pending = 1;
        }
    }
    s->next_due += passed * s->interval_ms; /* past every grid point that has passed */
    sampler_arm_locked(s);
    return pending;
}

/* lock held (or thread not started): choose timer ticking vs self-sampling for `interval` */
static void sampler_set_mode(Sampler *s, double interval)
{
    s->self_sample = interval < g_self_below_ms && g_ticks_per_ms > 0;
    s->hot->counter_init = s->self_sample ? SELF_SAMPLE_COUNTER_INIT : 10000;
    s->self_grace = s->self_sample ? 0 : interval;
    s->wake_slack = s->self_sample && g_self_wake_ms > interval ? g_self_wake_ms - interval : 0;
    sampler_arm_locked(s);
    sampler_poke(s); /* apply the new cadence at the next poll */
}

/* jsprof_ticks() per ms: a first estimate over ~0.25 ms when sampling first starts (so
   creating a profiler stays fast), refined from then on against a baseline that grows
   with the process (refine_ticks_rate), so its error shrinks below 0.1 % within a second. */
static uint64_t g_base_ticks;
static double g_base_mono;
static pthread_mutex_t g_rate_lock = PTHREAD_MUTEX_INITIALIZER;

/* one (ticks, mono) pair read between two clock reads; 0 when disturbed (> 20 us) */
static int read_pair(uint64_t *t, double *m)
{
    double m0 = mono_ms();
    *t = jsprof_ticks();
    double m1 = mono_ms();
    *m = (m0 + m1) / 2;
    return m1 - m0 < 0.02;
}

/* jsprof_ticks() one inline look at the clock takes (JSPROF_POLL_SKIP's: a load, a
   tick-counter read, a compare and a store), the least of 8 timings of 256 looks; at
   least 1, which also marks polls that compare inline. A TSC read is ~18 ns on this VM */
static uint64_t g_look_ticks = 1;
static void calibrate_look(void)
{
    volatile uint64_t due = UINT64_MAX / 2;
    uint64_t best = UINT64_MAX;
    unsigned n = 0;
    for (int r = 0; r < 8; r++) {
        uint64_t t0 = jsprof_ticks(), t1;
        for (int i = 0; i < 256; i++)
            n += jsprof_ticks() < (due += 1);
        t1 = jsprof_ticks();
        if (t1 > t0 && t1 - t0 < best)
            best = t1 - t0;
    }
    best = best == UINT64_MAX || n == 0 ? 0 : best / 256;
    g_look_ticks = best > 0 ? best : 1;
}

static void calibrate_ticks(void)
{
    uint64_t t0, t1;
    double m0, m1;
    if (g_ticks_per_ms > 0)
        return;
    if (JSPROF_TICKS_NS) {
        g_ticks_per_ms = 1e6;
        return;
    }
    pthread_mutex_lock(&g_rate_lock);
    for (int attempt = 0; attempt < 5 && g_ticks_per_ms <= 0; attempt++) {
        if (!read_pair(&t0, &m0))
            continue;
        while (mono_ms() - m0 < 0.25)
            ;
        if (read_pair(&t1, &m1) && t1 > t0 && m1 > m0) {
            g_base_ticks = t0;
            g_base_mono = m0;
            g_ticks_per_ms = (double)(t1 - t0) / (m1 - m0);
        }
    }
    calibrate_look();
    /* never undisturbed: g_ticks_per_ms stays 0 and the timer thread samples instead */
    pthread_mutex_unlock(&g_rate_lock);
}

/* any thread, now and then: the rate over the whole baseline so far */
static void refine_ticks_rate(void)
{
    uint64_t t;
    double m;
    if (JSPROF_TICKS_NS || g_ticks_per_ms <= 0 || !read_pair(&t, &m))
        return;
    if (m - g_base_mono > 10 && t > g_base_ticks && pthread_mutex_trylock(&g_rate_lock) == 0) {
        g_ticks_per_ms = (double)(t - g_base_ticks) / (m - g_base_mono);
        pthread_mutex_unlock(&g_rate_lock);
    }
}

static void *sampler_thread(void *arg)
{
    Sampler *s = arg;
    sigset_t all;
    int poke;
    struct timespec ts;

    /* signals (SIGINT) belong to the Python main thread, never to us */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* the kernel's default 50 us timer slack would be added to every tick's latency */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    pthread_mutex_lock(&s->lock);
    /* s->next_due was set by sampler_start: the grid starts when sampling was requested,
       not when this thread first ran (a new thread can wait for its first time slice) */
    while (s->running) {
        double now;
        ms_to_timespec(s->next_due + s->wake_slack, &ts);
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        if (!s->running)
            break;
        if (s->interval_changed) {
            /* sampler_set_interval restarted the grid (next_due) itself: the owner may
               have taken ticks on it already, so never move it back */
            s->interval_changed = 0;
            continue;
        }
        if (s->self_sample)
            refine_ticks_rate();
        now = mono_ms();
        if (now < s->next_due + s->wake_slack)
            continue; /* early wake-up, or the owner thread took the tick already */
        poke = sampler_due_locked(s, now);
        if (poke) {
            /* One write of 0 races with the interpreter's non-atomic `--counter` and is
               sometimes lost; the capture then waited for the next natural poll (10,000
               polls: up to a whole interval in code that polls rarely), which made the p99
               capture latency. So write once, wait ~1 us (lock released: the handler may
               capture meanwhile) and write once more if the tick is still pending. Only
               two writes: hammering the counter's cache line slows the interpreter. */
            double until;
            sampler_poke(s);
            pthread_mutex_unlock(&s->lock);
            until = mono_ms() + g_repoke_ms;
            while (mono_ms() < until)
                __asm__ __volatile__("" ::: "memory");
            if (g_repoke_ms > 0 && atomic_load_explicit(&s->pending, memory_order_relaxed) > 0)
                sampler_poke(s);
            pthread_mutex_lock(&s->lock);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ------------------------------------------------------------------------- host */

typedef struct Timer {
    struct Timer *next;
    int64_t id;
    double when; /* mono ms */
    double interval; /* < 0: one-shot */
    JSValue func;
    int argc;
    JSValue *argv;
} Timer;

typedef struct {
    JSValue promise, reason;
} Rejection;

#define MAX_REJECTIONS 64

typedef struct Host {
    JsprofHot hot; /* must come first: the interpreter's hooks read it via the opaque */
    JSRuntime *rt;
    JSContext *ctx;
    Sampler s;
    Timer *timers;
    int64_t next_timer_id;
    Timer *running_timer;    /* the timer whose callback runs now (out of the list) */
    int running_cleared;     /* ... and its callback cleared it */
    atomic_int interrupt_req;
    int catch_sigint;
    int busy;
    Rejection rej[MAX_REJECTIONS];
    int nrej;
    double time_origin_epoch;
    /* The Python side (session layer, owner-thread requests): py_cb(op, arg) -> str|None,
       called on the owner thread with the GIL taken (see host_py_call). While it runs,
       this thread may use the Runtime's methods although an eval is in progress. */
    PyObject *py_cb;
    int in_cb;
    pthread_t cb_thread;
    atomic_int owner_req; /* a foreign thread wants the runtime: park at the next poll */
    /* Lending (owner-thread dispatch without Python in the interrupt handler): a foreign
       thread that needs the runtime mid-eval asks (`want`); the owner parks at its next
       poll or event-loop turn, in C, and the foreign thread uses the runtime (`lent`)
       with the GIL, then gives it back. Under park_lock. */
    pthread_mutex_t park_lock;
    pthread_cond_t park_cond;
    int want, parked, lent;
    pthread_t lent_to;
    uintptr_t owner_stack_top, owner_stack_limit;
    JSValue dispatch_fn;  /* JS: (id) => fire samplebufferfull at Profiler `id` */
    /* error of the last run, converted to Python after the GIL is back */
    int err_kind; /* 0 none, 1 JS error, 2 interrupted, 3 host error */
    int err_compile; /* the error came from compiling the eval's own source: nothing ran */
    char *err_name, *err_message, *err_stack;
} Host;

static volatile sig_atomic_t g_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}

static inline int host_interrupted(Host *h)
{
    return atomic_load_explicit(&h->interrupt_req, memory_order_relaxed) ||
           (h->catch_sigint && g_sigint);
}

/* Call the Python side on the owner thread: takes the GIL (the eval released it), marks
   this thread as the one allowed into the Runtime meanwhile. 0: *out is the malloc'ed
   result (NULL for None); -1: *out is "ErrorName\nmessage" for a JS exception. */
static int host_py_call(Host *h, const char *op, const char *arg, size_t arglen, char **out,
                        size_t *outlen)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0, prev_in = h->in_cb;
    pthread_t prev_thread = h->cb_thread;
    PyObject *r = NULL;
    *out = NULL;
    *outlen = 0;
    if (h->py_cb) {
        h->in_cb = 1;
        h->cb_thread = pthread_self();
        r = PyObject_CallFunction(h->py_cb, "ss#", op, arg, (Py_ssize_t)arglen);
        h->in_cb = prev_in;
        h->cb_thread = prev_thread;
    } else {
        PyErr_SetString(PyExc_RuntimeError, "no Python host attached to this runtime");
    }
    if (!r) {
        PyObject *t, *v, *tb, *name = NULL, *msg = NULL;
        const char *ns = "Error", *ms = "";
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        if (v) {
            name = PyObject_GetAttrString(v, "js_name");
            if (!name) {
                PyErr_Clear();
                name = PyUnicode_FromString("InternalError");
            }
            msg = PyObject_Str(v);
            if (!msg)
                PyErr_Clear();
        }
        if (name && PyUnicode_Check(name))
            ns = PyUnicode_AsUTF8(name);
        if (msg)
            ms = PyUnicode_AsUTF8(msg);
        if (!ns || !ms) {
            PyErr_Clear();
            ns = ns ? ns : "Error";
            ms = ms ? ms : "";
        }
        *outlen = strlen(ns) + 1 + strlen(ms);
        *out = malloc(*outlen + 1);
        if (*out)
            snprintf(*out, *outlen + 1, "%s\n%s", ns, ms);
        else
            *outlen = 0;
        Py_XDECREF(name);
        Py_XDECREF(msg);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        rc = -1;
    } else {
        if (r != Py_None) {
            Py_ssize_t n;
            const char *str = PyUnicode_Check(r) ? PyUnicode_AsUTF8AndSize(r, &n) : NULL;
            if (str) {
                *out = malloc(n + 1);
                if (*out) {
                    memcpy(*out, str, n + 1);
                    *outlen = n;
                } else {
                    rc = -1; /* reported to JS as an out-of-memory error */
                }
            } else {
                PyErr_Clear();
            }
        }
        Py_DECREF(r);
    }
    PyGILState_Release(g);
    return rc;
}

/* Owner thread, at a poll or between event-loop turns (no GIL): while foreign threads
   want the runtime, wait for them to use it and give it back. */
static void host_park(Host *h)
{
    if (!atomic_exchange(&h->owner_req, 0))
        return;
    pthread_mutex_lock(&h->park_lock);
    if (h->want > 0) {
        h->parked = 1;
        pthread_cond_broadcast(&h->park_cond);
        while (h->want > 0 || h->lent)
            pthread_cond_wait(&h->park_cond, &h->park_lock);
        h->parked = 0;
    }
    pthread_mutex_unlock(&h->park_lock);
}

/* Self-sampling's approach to a due time. Far from it the handler runs every
   SELF_SAMPLE_COUNTER_INIT polls (~15 us of bytecode) and reads the tick counter; nearer,
   after a quarter of the polls the time left holds at the pace measured since its last
   run (at least APPROACH_POLLS, so the pace is measured again each time), so the look-ups
   close in on it (a few more handler runs per tick); within the window before it (10 us,
   at most 5 % of the interval), at every poll, and every frame exit looks too (the
   counter at 0: JSPROF_FRAME_EXIT's one load). So the tick is taken at the first poll,
   frame exit or built-in return after it comes due, in the function running then.
   Taken at whichever poll ended a count of 1,000 instead, samples went where polls are
   dense (a loop's backward jumps; a call's entry, where the frame is still the caller's)
   and never to a function with no loop and no call: on acorn, finishNodeAt (4-7 % of
   V8's self time) had 0 %, skipSpace's loop 28-32 % (V8: 6-9 % with nextToken, into
   which it inlines it; every poll and frame exit looking: 6 %). Measured (acorn, CPU
   clock, 1 ms): a 2 us window left 20 % of the ticks to the approach's overshoot
   (skipSpace 12.5 %), 10 us and a quarter 2 % (6.4 %), at no CPU cost we could see.
   On the wall clock a tick can also come due while the thread is descheduled; it is
   taken at the first check after the thread runs again, and the count set for the pace
   before the pause ends at some poll, too often a call's entry (the caller's stack):
   with the approach alone, test_quickjs_load busy-wall gave sortSync 48-279 ms against
   cmpSync 1,488-2,014 and failed 2 of 6 runs. So the wall clock takes the approach only
   with `watch` (rseq at hand, see JSPROF_RESUMED): a frame exit after a deschedule looks
   at the clock and counts the polls afresh (jsprof_left). Without rseq it looks every
   SELF_SAMPLE_COUNTER_INIT polls as before (its leaf functions' time going to their
   callers). No CPU time passes while descheduled, so the CPU clock has no such ticks. */
#define APPROACH_POLLS 8
/* 1: the approach (default); 0: a look every SELF_SAMPLE_COUNTER_INIT polls, frame exits
   taking only the timer thread's pokes (as before it; benchmarks compare); 2: every poll
   and frame exit looks (a reference, at a high cost). _quickjs.set_approach. */
static int g_approach = 1;
static double g_window_ms = 0.01, g_divide = 4;

/* owner thread: the handler runs again after `count` polls (-1: at every poll, and every
   frame exit looks at the clock); `exits`: frame exits look at the clock meanwhile (the
   CPU clock's last counts, see sampler_approach), and at every poll (count -1) the poll
   compares the clock inline, the handler called only once the tick is due */
static void sampler_set_cadence(Host *h, int count, int exits, uint64_t window)
{
    Sampler *s = &h->s;
    int c = count > 0 ? count : 0;
    uint64_t due = 0, look = 0, max = 0;
    h->hot.counter_init = count > 0 ? count : -1;
    /* an interrupt or an owner request wants the very next poll */
    if (host_interrupted(h) || atomic_load_explicit(&h->owner_req, memory_order_relaxed))
        c = 0;
    else if (exits && h->hot.armed) {
        due = h->hot.deadline;
        look = count > 0 ? 0 : g_look_ticks;
        max = due + (count > 0 ? 0 : window);
    }
    for (int i = 0; i < s->nctx; i++) {
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_due_max = max;
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_look = look;
        *(volatile uint64_t *)&s->ctxs[i]->jsprof_due = due;
        *(volatile int *)&s->ctxs[i]->interrupt_counter = c;
    }
    s->poll_count = count > 0 ? count : 1;
}

/* owner thread, the handler at the end of its count, `t` = jsprof_ticks(): the pace of
   the polls since its last run (not from one poll: precise mode keeps the pace it had) */
static void sampler_pace(Sampler *s, uint64_t t)
{
    if (s->poll_count >= APPROACH_POLLS && t > s->poll_ticks)
        s->ticks_per_poll = (double)(t - s->poll_ticks) / s->poll_count;
}

/* owner thread, self-sampling, `t` = jsprof_ticks(): the next look at the clock */
static void sampler_approach(Host *h, uint64_t t)
{
    Sampler *s = &h->s;
    double window = g_window_ms < s->interval_ms / 20 ? g_window_ms : s->interval_ms / 20;
    uint64_t dl = h->hot.deadline, w = (uint64_t)(window * g_ticks_per_ms);
    uint64_t target = dl > w ? dl - w : 0;
    double polls;
    int count;
    if (!s->running || !h->hot.armed)
        return;
    s->poll_ticks = t;
    /* the wall clock only where deschedules show at frame exits (see above) */
    int on = s->cpu || h->hot.watch;
    if (g_approach != 1 || !on)
        polls = g_approach == 0 || !on ? SELF_SAMPLE_COUNTER_INIT : 0;
    else if (t >= target)
        polls = 0; /* within the window (or due by the tick counter, not yet by the clock) */
    else if (s->ticks_per_poll <= 0)
        polls = SELF_SAMPLE_COUNTER_INIT;
    else if ((polls = (double)(target - t) / s->ticks_per_poll / g_divide) < APPROACH_POLLS)
        polls = APPROACH_POLLS; /* enough polls to measure the pace again */
    /* The last counts, of APPROACH_POLLS, run past the due time wherever 8 polls take
       longer than the window, and a count that ends past it took the tick at its last
       poll, not where the CPU was: in a sort, a comparator's tick went to the next call's
       entry poll, the caller's stack (a comparator with no loop and no call polls
       nowhere, and its frame exit looked only with the counter at 0). So frame exits
       look while such a count runs (a tick-counter read each). Leaf comparators of ~7
       us: callers 194-374 samples against 673-688 before (1.2 % with every poll and
       frame exit looking); the load test's ~1 us ones 8.5 % (issue 32). The CPU clock
       only, where it was measured: on the wall clock (frame exits look after each
       deschedule already) test_short_builtin_calls_charged_to_caller failed 2 of 3
       runs with it at load 12 (1 of 14 on main's build). */
    int exits = s->cpu && g_approach == 1 && polls <= APPROACH_POLLS;
    if (polls >= SELF_SAMPLE_COUNTER_INIT)
        count = SELF_SAMPLE_COUNTER_INIT;
    else if (polls < 1)
        count = -1;
    else
        count = (int)polls;
    sampler_set_cadence(h, count, exits, w);
}

/* Owner thread, between polls: capture the ticks pending or due now (deadline passed). */
static void sampler_take_due(Sampler *s, JSRuntime *rt, int at)
{
    pthread_mutex_lock(&s->lock);
    if (s->hot->armed && s->running) {
        double now = mono_ms();
        if (now >= s->next_due)
            sampler_due_locked(s, now);
        else
            sampler_arm_locked(s); /* the rate's error: look again a little later */
    }
    sampler_capture_locked(s, rt, at);
    /* A tick that came due during the capture is this stack's too: the capture reads the
       thread's CPU clock, a system call, and on a loaded machine the scheduler often
       switches the thread out on its way back (it was due to), for as long as other
       processes hold the core. Left to the next check, the stall's last tick went to the
       next call's entry poll after a frame exit's capture (the approach looks at every
       poll once the deadline has passed), the caller's stack: in the load test under
       busy processes, the leaf comparators' callers had 10-40 % of their ms. */
    if (s->hot->armed && s->running && !s->cpu) {
        double now = mono_ms();
        if (now >= s->next_due && sampler_due_locked(s, now))
            sampler_capture_locked(s, rt, CAPTURE_AGAIN);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Owner thread: ticks still pending after a capture had no JavaScript frame to go to (a
   top-level call's entry, the script or module compiled just before it): the very next
   poll takes them, the first with a frame, that of the code about to run. Left to the
   poll count, they went to whichever function the count ended in: the compile of
   prettier's modules (~50 ms of CPU) to esbuild's `__export` helper, the first function
   the first module calls. */
static inline void sampler_keep_pending(Sampler *s)
{
    if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0)
        sampler_poke(s);
}

/* Owner thread, in the interpreter: only the sampler's C work (no Python, no JS). */
static int interrupt_handler(JSRuntime *rt, void *opaque)
{
    Host *h = opaque;
    Sampler *s = &h->s;
    if (h->hot.armed) {
        /* self-sampling: take the ticks pending or due (one tick-counter read), then
           choose when to look next */
        uint64_t t = jsprof_ticks();
        if (h->hot.watch)
            rseq_arm(); /* a look at the clock: a deschedule from here on shows again */
        sampler_pace(s, t);
        if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0 ||
            t >= h->hot.deadline) {
            sampler_take_due(s, rt, CAPTURE_POLL);
            t = jsprof_ticks();
        }
        sampler_approach(h, t);
        sampler_keep_pending(s);
    } else if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0) {
        pthread_mutex_lock(&s->lock);
        sampler_capture_locked(s, rt, CAPTURE_POLL);
        pthread_mutex_unlock(&s->lock);
        sampler_keep_pending(s);
    } else if (s->running && mono_ms() >= s->next_due + s->self_grace) {
        /* A natural poll, the timer thread ticking: a tick overdue by more than an
           interval means the timer thread is starved of CPU (a loaded machine), so it
           is charged to what runs now, not to whatever runs when the timer gets a slice.
           (Racy reads: re-checked under lock.) */
        pthread_mutex_lock(&s->lock);
        double now = mono_ms();
        if (s->running && now >= s->next_due && sampler_due_locked(s, now))
            sampler_capture_locked(s, rt, CAPTURE_POLL);
        pthread_mutex_unlock(&s->lock);
    }
    if (atomic_load_explicit(&h->owner_req, memory_order_relaxed))
        host_park(h);
    /* non-zero makes QuickJS throw an uncatchable "interrupted": Ctrl-C / interrupt() */
    return host_interrupted(h);
}

static void jsprof_freeing(struct JSRuntime *rt)
{
    Host *h = JS_GetRuntimeOpaque(rt);
    Sampler *s;
    if (!h || !rt->current_stack_frame)
        return;
    s = &h->s;
    if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0 ||
        (s->hot->armed && jsprof_ticks() >= s->hot->deadline))
        sampler_take_due(s, rt, CAPTURE_OTHER);
}

/* A big buffer was reallocated (JSPROF_REALLOCATED): a regexp `replace` with a callback
   over 3,000 lines of 2,300 characters (12 passes, CPU clock, 0.25 ms) grows its result
   string to 6.9 MB, and once glibc serves such sizes from its heap (its mmap threshold
   rises to the size of the last big block freed) each growth copies megabytes: stretches
   of ~2.5 ms of CPU between two callbacks, 2-3 a pass, whose ticks all went to the next
   callback's `toLowerCase()` return (the callback: 34-54 ms of self time against its own
   ~3.5 ms). Not inside the collector's phases (its counts are being rewritten). */
static void jsprof_reallocated(struct JSRuntime *rt)
{
    if (rt->gc_phase == JS_GC_PHASE_NONE)
        jsprof_freeing(rt);
}

/* A garbage collection (JS_RunGC: QuickJS's cycle collector, run when an object's
   allocation passes the threshold) polls nowhere: its ticks went to the next look after
   it, whichever frame that was. In a built-in that allocates between callbacks (a regexp
   `replace` with a function: a match array per call) that was the next callback, which
   got the collector's milliseconds as self time. At its start the ticks already due are
   the allocating frame's (taken with its stack, like a poll's); at its end the ticks due
   meanwhile are the collector's: samples with no stack and the `gc` marker, what V8
   records for its own collector (Node's "(garbage collector)" row). Only under
   JavaScript: a collection with no frame (a compile's, the runtime's last) leaves its
   ticks to the rules for no frame yet (the code about to run). */
static void jsprof_gc(struct JSRuntime *rt, int begin)
{
    Host *h = JS_GetRuntimeOpaque(rt);
    Sampler *s;
    if (!h)
        return;
    s = &h->s;
    if (begin ? !rt->current_stack_frame : !s->gc)
        return;
    if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0 ||
        (s->hot->armed && jsprof_ticks() >= s->hot->deadline))
        sampler_take_due(s, rt, begin ? CAPTURE_POLL : CAPTURE_OTHER);
    s->gc = begin;
    /* the handler's pace leaves the collection out: counted afresh from its end */
    if (!begin && s->hot->armed)
        sampler_approach(h, jsprof_ticks());
}

/* a built-in's return (at == CAPTURE_NATIVE) or a bytecode frame's exit (CAPTURE_RETURN)
   with the poll counter at or below 0, or (built-ins) the deadline passed */
static void jsprof_left(struct JSContext *ctx, int at)
{
    Host *h = JS_GetRuntimeOpaque(ctx->rt);
    Sampler *s;
    if (!h)
        return;
    s = &h->s;
    if (at == CAPTURE_RETURN && JSPROF_RESUMED(ctx)) {
        /* the thread was descheduled since its last look: a tick that came due meanwhile
           goes to this frame, where the thread was (the first check after it ran again);
           left to the handler's count, it went to whichever poll ended it, often the
           entry of the next call, the caller's stack. And the count was set for the pace
           before the pause: set again from now. */
        uint64_t t = jsprof_ticks();
        rseq_arm();
        if (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0 ||
            (s->hot->armed && t >= s->hot->deadline)) {
            sampler_take_due(s, ctx->rt, at);
            t = jsprof_ticks();
        }
        if (s->hot->armed)
            sampler_approach(h, t);
    } else if ((at == CAPTURE_NATIVE || g_approach) &&
        (atomic_load_explicit(&s->pending, memory_order_relaxed) > 0 ||
         (s->hot->armed && jsprof_ticks() >= s->hot->deadline))) {
        sampler_take_due(s, ctx->rt, at);
        if (s->hot->armed)
            sampler_approach(h, jsprof_ticks());
    }
    /* the counter was zeroed for a tick: back to the poll cadence (in precise mode that
       is 0 again), unless an interrupt or an owner request wants the next poll to reach
       the handler */
    if (ctx->interrupt_counter <= 0 && !host_interrupted(h) &&
        !atomic_load_explicit(&h->owner_req, memory_order_relaxed) &&
        atomic_load_explicit(&s->pending, memory_order_relaxed) == 0)
        ctx->interrupt_counter = JS_INTERRUPT_COUNTER_INIT;
}

static void jsprof_native_return(struct JSContext *ctx)
{
    jsprof_left(ctx, CAPTURE_NATIVE);
}

static void jsprof_frame_exit(struct JSContext *ctx)
{
    jsprof_left(ctx, CAPTURE_RETURN);
}

static void host_set_idle(Host *h, int idle)
{
    Sampler *s = &h->s;
    pthread_mutex_lock(&s->lock);
    if (s->running && mono_ms() >= s->next_due) {
        /* ticks due before this transition belong to the state before it (with
           self-sampling the timer thread may not have looked yet) */
        if (s->idle)
            sampler_due_locked(s, mono_ms());
        else if (sampler_due_locked(s, mono_ms()) && !idle)
            sampler_capture_locked(s, h->rt, CAPTURE_OTHER);
    }
    if (idle)
        sampler_flush_pending_idle_locked(s);
    if (s->running)
        sampler_cpu_in_locked(s, !idle); /* after the ticks due: they were the state before */
    if (!idle) /* JS runs on this thread from here: the off-CPU baseline */
        sampler_mark_running_locked(s, mono_ms(), thread_cpu_ms(CLOCK_THREAD_CPUTIME_ID));
    s->idle = idle;
    pthread_mutex_unlock(&s->lock);
}

/* The script's first instruction is next: with a script window, recording starts here,
   with a tick due now (captured at the first poll: the script's first sample, which also
   carries the time spent compiling it). */
static void host_open_window(Host *h)
{
    Sampler *s = &h->s;
    pthread_mutex_lock(&s->lock);
    if (s->held) {
        s->held = 0;
        if (s->running) {
            s->next_due = mono_ms();
            if (s->cpu) { /* a tick due now on the CPU clock too */
                s->cpu_next = s->cpu_take = s->cpu_seen = runtime_cpu_locked(s);
                s->wall_seen = s->next_due;
            }
            sampler_arm_locked(s);
            sampler_poke(s); /* and look at the first poll */
        }
    }
    pthread_mutex_unlock(&s->lock);
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* console.* formatting: strings as-is, Errors by their stack, plain objects as JSON */
static JSValue js_console_write(JSContext *ctx, JSValueConst this_val, int argc,
                                JSValueConst *argv, int magic)
{
    (void)this_val;
    DynBuf db;
    dbuf_init(&db);
    for (int i = 0; i < argc; i++) {
        JSValueConst v = argv[i];
        const char *str = NULL;
        size_t len = 0;
        JSValue tmp = JS_UNDEFINED;
        if (i)
            dbuf_putc(&db, ' ');
        if (JS_IsObject(v) && !JS_IsFunction(ctx, v)) {
            if (JS_IsError(v)) {
                JSValue st = JS_GetPropertyStr(ctx, v, "stack");
                JSValue s0 = JS_ToString(ctx, v);
                str = JS_ToCStringLen(ctx, &len, s0);
                if (str) {
                    dbuf_put(&db, (const uint8_t *)str, len);
                    JS_FreeCString(ctx, str);
                }
                JS_FreeValue(ctx, s0);
                if (JS_IsString(st)) {
                    str = JS_ToCStringLen(ctx, &len, st);
                    if (str) {
                        dbuf_putc(&db, '\n');
                        dbuf_put(&db, (const uint8_t *)str, len);
                        /* stack text ends with a newline already */
                        if (len && str[len - 1] == '\n')
                            db.size--;
                        JS_FreeCString(ctx, str);
                    }
                }
                JS_FreeValue(ctx, st);
                continue;
            }
            tmp = JS_JSONStringify(ctx, v, JS_UNDEFINED, JS_UNDEFINED);
            if (JS_IsException(tmp)) {
                JS_FreeValue(ctx, JS_GetException(ctx));
                tmp = JS_UNDEFINED;
            }
        }
        str = JS_ToCStringLen(ctx, &len, JS_IsString(tmp) ? (JSValueConst)tmp : v);
        JS_FreeValue(ctx, tmp);
        if (!str) {
            JS_FreeValue(ctx, JS_GetException(ctx));
            continue;
        }
        dbuf_put(&db, (const uint8_t *)str, len);
        JS_FreeCString(ctx, str);
    }
    dbuf_putc(&db, '\n');
    write_all(magic ? 2 : 1, (const char *)db.buf, db.size);
    dbuf_free(&db);
    return JS_UNDEFINED;
}

static JSValue js_set_timer(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv,
                            int magic)
{
    (void)this_val;
    Host *h = JS_GetRuntimeOpaque(JS_GetRuntime(ctx));
    double delay = 0;
    Timer *t, **pp;
    if (argc < 1 || !JS_IsFunction(ctx, argv[0]))
        return JS_ThrowTypeError(ctx, "callback must be a function");
    if (argc > 1 && JS_ToFloat64(ctx, &delay, argv[1]))
        return JS_EXCEPTION;
    if (!(delay >= 0) || isnan(delay))
        delay = 0;
    t = js_mallocz(ctx, sizeof(*t));
    if (!t)
        return JS_EXCEPTION;
    t->id = ++h->next_timer_id;
    t->when = mono_ms() + delay;
    t->interval = magic ? (delay < 1 ? 1 : delay) : -1;
    t->func = js_dup(argv[0]);
    t->argc = argc > 2 ? argc - 2 : 0;
    if (t->argc) {
        t->argv = js_malloc(ctx, sizeof(JSValue) * t->argc);
        if (!t->argv) {
            JS_FreeValue(ctx, t->func);
            js_free(ctx, t);
            return JS_EXCEPTION;
        }
        for (int i = 0; i < t->argc; i++)
            t->argv[i] = js_dup(argv[i + 2]);
    }
    /* keep the list sorted by due time, FIFO among equals */
    for (pp = &h->timers; *pp && (*pp)->when <= t->when; pp = &(*pp)->next)
        ;
    t->next = *pp;
    *pp = t;
    return JS_NewInt64(ctx, t->id);
}

static void timer_free(JSRuntime *rt, Timer *t)
{
    JS_FreeValueRT(rt, t->func);
    for (int i = 0; i < t->argc; i++)
        JS_FreeValueRT(rt, t->argv[i]);
    js_free_rt(rt, t->argv);
    js_free_rt(rt, t);
}

static JSValue js_clear_timer(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    Host *h = JS_GetRuntimeOpaque(JS_GetRuntime(ctx));
    int64_t id;
    if (argc < 1 || JS_ToInt64(ctx, &id, argv[0]))
        return JS_UNDEFINED;
    if (h->running_timer && h->running_timer->id == id) {
        /* clearInterval(id) inside its own callback: not re-armed after it returns */
        h->running_cleared = 1;
        return JS_UNDEFINED;
    }
    for (Timer **pp = &h->timers; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            Timer *t = *pp;
            *pp = t->next;
            timer_free(JS_GetRuntime(ctx), t);
            break;
        }
    }
    return JS_UNDEFINED;
}

static void rejection_tracker(JSContext *ctx, JSValueConst promise, JSValueConst reason,
                              bool is_handled, void *opaque)
{
    Host *h = opaque;
    if (!is_handled) {
        if (h->nrej < MAX_REJECTIONS) {
            h->rej[h->nrej].promise = js_dup(promise);
            h->rej[h->nrej].reason = js_dup(reason);
            h->nrej++;
        }
    } else {
        for (int i = 0; i < h->nrej; i++) {
            if (JS_VALUE_GET_PTR(h->rej[i].promise) == JS_VALUE_GET_PTR(promise)) {
                JS_FreeValue(ctx, h->rej[i].promise);
                JS_FreeValue(ctx, h->rej[i].reason);
                h->rej[i] = h->rej[--h->nrej];
                break;
            }
        }
    }
}

static void clear_rejections(Host *h)
{
    for (int i = 0; i < h->nrej; i++) {
        JS_FreeValue(h->ctx, h->rej[i].promise);
        JS_FreeValue(h->ctx, h->rej[i].reason);
    }
    h->nrej = 0;
}

static char *dup_js_string(JSContext *ctx, JSValueConst v)
{
    size_t len;
    const char *s;
    char *r;
    if (JS_IsException(v)) { /* the read that gave v failed: drop its exception */
        JS_FreeValue(ctx, JS_GetException(ctx));
        return strdup("");
    }
    s = JS_ToCStringLen(ctx, &len, v);
    if (!s) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return strdup("");
    }
    r = malloc(len + 1);
    if (r) {
        memcpy(r, s, len);
        r[len] = 0;
    }
    JS_FreeCString(ctx, s);
    return r;
}

static void host_clear_error(Host *h)
{
    free(h->err_name);
    free(h->err_message);
    free(h->err_stack);
    h->err_name = h->err_message = h->err_stack = NULL;
    h->err_kind = 0;
    h->err_compile = 0;
}

/* take ownership of an exception value and remember it for Python */
static void host_set_error(Host *h, JSValue exc)
{
    JSContext *ctx = h->ctx;
    if (h->err_kind)
        goto done;
    if (host_interrupted(h) || (JS_IsUncatchableError(exc) && JS_IsError(exc))) {
        h->err_kind = 2;
        goto done;
    }
    h->err_kind = 1;
    if (JS_IsError(exc)) {
        JSValue v = JS_GetPropertyStr(ctx, exc, "name");
        h->err_name = dup_js_string(ctx, v);
        JS_FreeValue(ctx, v);
        v = JS_GetPropertyStr(ctx, exc, "message");
        h->err_message = dup_js_string(ctx, v);
        JS_FreeValue(ctx, v);
        v = JS_GetPropertyStr(ctx, exc, "stack");
        if (JS_IsException(v))
            JS_FreeValue(ctx, JS_GetException(ctx));
        h->err_stack = JS_IsString(v) ? dup_js_string(ctx, v) : strdup("");
        JS_FreeValue(ctx, v);
    } else {
        h->err_name = strdup("Error");
        h->err_message = dup_js_string(ctx, exc);
        h->err_stack = strdup("");
        if (h->err_message) {
            /* "Uncaught 42": say what was thrown */
            size_t n = strlen(h->err_message) + 16;
            char *m = malloc(n);
            if (m) {
                snprintf(m, n, "Uncaught %s", h->err_message);
                free(h->err_message);
                h->err_message = m;
            }
        }
    }
done:
    JS_FreeValue(ctx, exc);
}

static void host_take_exception(Host *h)
{
    host_set_error(h, JS_GetException(h->ctx));
}

static int host_run_jobs(Host *h)
{
    JSContext *c;
    for (;;) {
        int r = JS_ExecutePendingJob(h->rt, &c);
        if (r == 0)
            return 0;
        if (r < 0) {
            host_take_exception(h);
            return -1;
        }
    }
}

static int host_check_rejections(Host *h)
{
    if (h->nrej > 0) {
        JSValue reason = js_dup(h->rej[0].reason);
        clear_rejections(h);
        host_set_error(h, reason);
        return -1;
    }
    return 0;
}

static void host_clear_timers(Host *h)
{
    while (h->timers) {
        Timer *t = h->timers;
        h->timers = t->next;
        timer_free(h->rt, t);
    }
}

static JSValue job_call1(JSContext *ctx, int argc, JSValueConst *argv)
{
    (void)argc;
    return JS_Call(ctx, argv[0], JS_UNDEFINED, 1, &argv[1]);
}

/* A session's buffer may be full: ask the Python side (owner thread, between jobs, never
   inside the sampler); it answers with the ids of JS Profilers whose buffer filled, and
   samplebufferfull is dispatched to each as a job. */
static int host_check_buffers(Host *h)
{
    char *out, *p;
    size_t n;
    int rc = 0;
    if (!atomic_exchange(&h->s.check_due, 0))
        return 0;
    if (host_py_call(h, "check", "", 0, &out, &n) == 0 && out && JS_IsFunction(h->ctx, h->dispatch_fn)) {
        JSContext *ctx = h->s.ctxs[0];
        for (p = out; *p;) {
            char *end;
            long long id = strtoll(p, &end, 10);
            JSValue args[2];
            if (end == p)
                break;
            args[0] = h->dispatch_fn;
            args[1] = JS_NewInt64(ctx, id);
            if (JS_EnqueueJob(ctx, job_call1, 2, args) < 0) {
                /* out of memory: the run ends with that error (its exception is pending) */
                host_take_exception(h);
                rc = -1;
                break;
            }
            p = *end ? end + 1 : end;
        }
    }
    free(out);
    return rc;
}

/* Run promise jobs and timers until nothing is left (as qjs does). 0 ok, -1 error. */
static int host_event_loop(Host *h)
{
    for (;;) {
        Timer *t;
        double now;
        host_park(h);
        if (host_check_buffers(h) < 0 || host_run_jobs(h) < 0 || host_check_rejections(h) < 0)
            return -1;
        if (atomic_load(&h->s.check_due))
            continue; /* a job may have filled a buffer: dispatch before sleeping */
        if (host_interrupted(h)) {
            h->err_kind = 2;
            return -1;
        }
        t = h->timers;
        if (!t)
            return 0;
        now = mono_ms();
        if (t->when > now) {
            /* nothing to run: the sampler records idle samples meanwhile. Sleep in short
               slices so Ctrl-C and interrupt() are noticed. */
            double wait = t->when - now;
            struct timespec ts;
            if (wait > 10)
                wait = 10;
            ms_to_timespec(wait, &ts);
            host_set_idle(h, 1);
            nanosleep(&ts, NULL);
            host_set_idle(h, 0);
            continue;
        }
        h->timers = t->next;
        h->running_timer = t;
        h->running_cleared = 0;
        {
            JSValue ret = JS_Call(h->ctx, t->func, JS_UNDEFINED, t->argc, vc(t->argv));
            h->running_timer = NULL;
            if (JS_IsException(ret)) {
                timer_free(h->rt, t);
                host_take_exception(h);
                return -1;
            }
            JS_FreeValue(h->ctx, ret);
        }
        if (t->interval >= 0 && !h->running_cleared) {
            Timer **pp;
            t->when = mono_ms() + t->interval;
            for (pp = &h->timers; *pp && (*pp)->when <= t->when; pp = &(*pp)->next)
                ;
            t->next = *pp;
            *pp = t;
        } else {
            timer_free(h->rt, t);
        }
    }
}

static char *read_file(const char *path, size_t *plen)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    *plen = n;
    return buf;
}

/* import.meta.url and .main, as qjs provides them */
static void set_import_meta(JSContext *ctx, JSModuleDef *m, const char *name, int is_main)
{
    JSValue meta = JS_GetImportMeta(ctx, m);
    if (!JS_IsException(meta)) {
        char url[PATH_MAX + 16];
        JSValue u;
        snprintf(url, sizeof url, "%s%s", name[0] == '/' ? "file://" : "", name);
        u = JS_NewString(ctx, url);
        /* out of memory: no import.meta.url (the module's own code will fail soon) */
        if (JS_IsException(u) ||
            JS_DefinePropertyValueStr(ctx, meta, "url", u, JS_PROP_C_W_E) < 0 ||
            JS_DefinePropertyValueStr(ctx, meta, "main", JS_NewBool(ctx, is_main), JS_PROP_C_W_E) < 0)
            JS_FreeValue(ctx, JS_GetException(ctx));
    } else {
        JS_FreeValue(ctx, JS_GetException(ctx));
    }
    JS_FreeValue(ctx, meta);
}

static JSModuleDef *module_loader(JSContext *ctx, const char *name, void *opaque)
{
    (void)opaque;
    size_t len;
    char *buf = read_file(name, &len);
    JSValue fn;
    JSModuleDef *m;
    if (!buf) {
        JS_ThrowReferenceError(ctx, "could not load module '%s'", name);
        return NULL;
    }
    fn = JS_Eval(ctx, buf, len, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    free(buf);
    if (JS_IsException(fn))
        return NULL;
    m = JS_VALUE_GET_PTR(fn);
    set_import_meta(ctx, m, name, 0);
    JS_FreeValue(ctx, fn);
    return m;
}

/* the whole run of one eval: compile, execute, then the event loop. GIL released. */
static JSValue host_eval(Host *h, const char *src, size_t len, const char *filename, int module)
{
    JSValue r;
    int flags = module ? JS_EVAL_TYPE_MODULE : JS_EVAL_TYPE_GLOBAL;
    JS_UpdateStackTop(h->rt); /* we may be on another thread than last time */
    pthread_mutex_lock(&h->s.lock);
    /* the CPU clock reads this thread's: the one running the runtime from here on */
    h->s.owner_cpu_ok = pthread_getcpuclockid(pthread_self(), &h->s.owner_cpu) == 0;
    pthread_mutex_unlock(&h->s.lock);
    host_set_idle(h, 0);
    host_open_window(h);
    /* Compiled apart from the run (what JS_Eval does in one step), so that a script that
       does not parse is told from one that threw: the first is the user's mistake before
       any of it ran (jsprof record exits 2 naming file:line:column), the second is the
       script's own ending (exit 1, samples kept). */
    r = JS_Eval(h->ctx, src, len, filename, flags | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(r)) {
        host_take_exception(h);
        h->err_compile = h->err_kind == 1;
        r = JS_UNDEFINED;
    } else {
        if (module)
            set_import_meta(h->ctx, JS_VALUE_GET_PTR(r), filename, 1);
        r = JS_EvalFunction(h->ctx, r);
        if (JS_IsException(r)) {
            host_take_exception(h);
            r = JS_UNDEFINED;
        } else if (host_event_loop(h) == 0 && JS_IsPromise(r)) {
            /* a module's evaluation promise: report its rejection */
            if (JS_PromiseState(h->ctx, r) == JS_PROMISE_REJECTED) {
                host_set_error(h, JS_PromiseResult(h->ctx, r));
            }
        }
    }
    if (h->err_kind) {
        host_clear_timers(h);
        clear_rejections(h);
        /* drop jobs left behind by an aborted run */
        while (JS_IsJobPending(h->rt)) {
            JSContext *c;
            if (JS_ExecutePendingJob(h->rt, &c) < 0)
                JS_FreeValue(h->ctx, JS_GetException(h->ctx));
        }
    }
    host_set_idle(h, 1);
    pthread_mutex_lock(&h->s.lock);
    h->s.held = h->s.window; /* the script's last job is over */
    pthread_mutex_unlock(&h->s.lock);
    return r;
}

/* ------------------------------------------------------------------------- Python type */

typedef struct {
    PyObject_HEAD
    Host *h;
} RuntimeObject;

static PyObject *JSErrorType; /* jsprof.errors.JSError, imported lazily */

static int ensure_error_types(void)
{
    if (!JSErrorType) {
        PyObject *m = PyImport_ImportModule("jsprof.errors");
        if (!m)
            return -1;
        JSErrorType = PyObject_GetAttrString(m, "JSError");
        Py_DECREF(m);
        if (!JSErrorType)
            return -1;
    }
    return 0;
}

/* __jsprof_host(op, arg): the JS Profiler global's way into the Python session layer.
   Returns "R<result>" or "E<ErrorName>\n<message>" (the JS side throws the right error). */
static JSValue js_host_call(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    Host *h = JS_GetRuntimeOpaque(JS_GetRuntime(ctx));
    const char *op, *arg;
    size_t arglen, n;
    char *out;
    int rc;
    JSValue ret;
    if (argc < 2)
        return JS_ThrowTypeError(ctx, "__jsprof_host(op, arg)");
    op = JS_ToCString(ctx, argv[0]);
    if (!op)
        return JS_EXCEPTION;
    arg = JS_ToCStringLen(ctx, &arglen, argv[1]);
    if (!arg) {
        JS_FreeCString(ctx, op);
        return JS_EXCEPTION;
    }
    rc = host_py_call(h, op, arg, arglen, &out, &n);
    JS_FreeCString(ctx, op);
    JS_FreeCString(ctx, arg);
    if (rc < 0 && !out) {
        free(out);
        return JS_ThrowOutOfMemory(ctx);
    }
    {
        char *buf = malloc(n + 2);
        if (!buf) {
            free(out);
            return JS_ThrowOutOfMemory(ctx);
        }
        buf[0] = rc < 0 ? 'E' : 'R';
        if (out)
            memcpy(buf + 1, out, n);
        buf[n + 1] = 0;
        ret = JS_NewStringLen(ctx, buf, n + 1);
        free(buf);
    }
    free(out);
    return ret;
}

static JSValue js_set_dispatch(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv)
{
    (void)this_val;
    Host *h = JS_GetRuntimeOpaque(JS_GetRuntime(ctx));
    if (argc < 1 || !JS_IsFunction(ctx, argv[0]))
        return JS_ThrowTypeError(ctx, "a function is needed");
    JS_FreeValue(ctx, h->dispatch_fn);
    h->dispatch_fn = js_dup(argv[0]);
    return JS_UNDEFINED;
}

static const JSCFunctionListEntry console_funcs[] = {
    JS_CFUNC_MAGIC_DEF("log", 0, js_console_write, 0),
    JS_CFUNC_MAGIC_DEF("info", 0, js_console_write, 0),
    JS_CFUNC_MAGIC_DEF("debug", 0, js_console_write, 0),
    JS_CFUNC_MAGIC_DEF("error", 0, js_console_write, 1),
    JS_CFUNC_MAGIC_DEF("warn", 0, js_console_write, 1),
};

static const JSCFunctionListEntry global_funcs[] = {
    JS_CFUNC_MAGIC_DEF("setTimeout", 2, js_set_timer, 0),
    JS_CFUNC_MAGIC_DEF("setInterval", 2, js_set_timer, 1),
    JS_CFUNC_DEF("clearTimeout", 1, js_clear_timer),
    JS_CFUNC_DEF("clearInterval", 1, js_clear_timer),
    JS_CFUNC_MAGIC_DEF("print", 0, js_console_write, 0),
};

/* only in the main realm; the bootstrap (js/quickjs_profiler.js) takes and deletes them */
static const JSCFunctionListEntry hook_funcs[] = {
    JS_CFUNC_DEF("__jsprof_host", 2, js_host_call),
    JS_CFUNC_DEF("__jsprof_set_dispatch", 1, js_set_dispatch),
};

/* console, timers and print, in every realm; -1 (exception pending) when out of memory */
static int host_install_globals(JSContext *ctx)
{
    JSValue g = JS_GetGlobalObject(ctx);
    JSValue console = JS_NewObject(ctx);
    int rc = -1;
    if (JS_IsException(console))
        goto done;
    if (JS_SetPropertyFunctionList(ctx, console, console_funcs, countof(console_funcs)) < 0) {
        JS_FreeValue(ctx, console);
        goto done;
    }
    if (JS_SetPropertyStr(ctx, g, "console", console) < 0 ||
        JS_SetPropertyFunctionList(ctx, g, global_funcs, countof(global_funcs)) < 0)
        goto done;
    rc = 0;
done:
    JS_FreeValue(ctx, g);
    return rc;
}

static int Runtime_init(RuntimeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"args", NULL};
    PyObject *script_args = NULL;
    Host *h;
    JSValue g, arr, perf;
    double mono_now, epoch_now;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &script_args))
        return -1;
    if (self->h) {
        PyErr_SetString(PyExc_RuntimeError, "Runtime already initialised");
        return -1;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        PyErr_NoMemory();
        return -1;
    }
    h->s.hot = &h->hot;
    h->rt = JS_NewRuntime();
    if (!h->rt) {
        free(h);
        PyErr_NoMemory();
        return -1;
    }
    JS_SetRuntimeOpaque(h->rt, h);
    JS_SetInterruptHandler(h->rt, interrupt_handler, h);
    JS_SetHostPromiseRejectionTracker(h->rt, rejection_tracker, h);
    JS_SetModuleLoaderFunc(h->rt, NULL, module_loader, h);
    h->ctx = JS_NewContext(h->rt);
    if (!h->ctx) {
        JS_FreeRuntime(h->rt);
        free(h);
        PyErr_NoMemory();
        return -1;
    }
    mono_now = mono_ms();
    epoch_now = real_ms();
    /* performance.timeOrigin as the web has it: Unix epoch ms of performance.now() == 0 */
    h->time_origin_epoch = epoch_now - (mono_now - h->ctx->time_origin);

    pthread_mutex_init(&h->s.lock, NULL);
    pthread_mutex_init(&h->park_lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&h->park_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&h->s.cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    h->s.idle = 1;
    h->s.ctxs[0] = h->ctx;
    h->s.nctx = 1;
    h->s.time_origin_mono = h->ctx->time_origin;

    h->dispatch_fn = JS_UNDEFINED;
    self->h = h; /* from here on a failure is cleaned up by Runtime_dealloc */
    if (host_install_globals(h->ctx) < 0)
        goto js_fail;
    g = JS_GetGlobalObject(h->ctx);
    if (JS_SetPropertyFunctionList(h->ctx, g, hook_funcs, countof(hook_funcs)) < 0) {
        JS_FreeValue(h->ctx, g);
        goto js_fail;
    }
    /* quickjs-ng's timeOrigin is the monotonic clock's reading (read-only); the web's is
       Unix epoch ms. Replace the object, keeping quickjs-ng's own now(). */
    perf = JS_NewObject(h->ctx);
    if (JS_IsException(perf) ||
        JS_SetPropertyFunctionList(h->ctx, perf, js_perf_proto_funcs, countof(js_perf_proto_funcs)) < 0 ||
        JS_DefinePropertyValueStr(h->ctx, perf, "timeOrigin", JS_NewFloat64(h->ctx, h->time_origin_epoch),
                                  JS_PROP_ENUMERABLE) < 0 ||
        JS_DefinePropertyValueStr(h->ctx, g, "performance", js_dup(perf),
                                  JS_PROP_WRITABLE | JS_PROP_ENUMERABLE | JS_PROP_CONFIGURABLE) < 0) {
        JS_FreeValue(h->ctx, perf);
        JS_FreeValue(h->ctx, g);
        goto js_fail;
    }
    JS_FreeValue(h->ctx, perf);
    arr = JS_NewArray(h->ctx);
    if (JS_IsException(arr)) {
        JS_FreeValue(h->ctx, g);
        goto js_fail;
    }
    if (script_args && script_args != Py_None) {
        PyObject *seq = PySequence_Fast(script_args, "args must be a sequence of str");
        if (!seq) {
            JS_FreeValue(h->ctx, arr);
            JS_FreeValue(h->ctx, g);
            return -1;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            Py_ssize_t n;
            const char *s = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &n);
            if (!s) {
                Py_DECREF(seq);
                JS_FreeValue(h->ctx, arr);
                JS_FreeValue(h->ctx, g);
                return -1;
            }
            JSValue str = JS_NewStringLen(h->ctx, s, n);
            if (JS_IsException(str) || JS_SetPropertyUint32(h->ctx, arr, (uint32_t)i, str) < 0) {
                Py_DECREF(seq);
                JS_FreeValue(h->ctx, arr);
                JS_FreeValue(h->ctx, g);
                goto js_fail;
            }
        }
        Py_DECREF(seq);
    }
    if (JS_SetPropertyStr(h->ctx, g, "scriptArgs", arr) < 0) {
        JS_FreeValue(h->ctx, g);
        goto js_fail;
    }
    JS_FreeValue(h->ctx, g);
    return 0;
js_fail:
    JS_FreeValue(h->ctx, JS_GetException(h->ctx));
    PyErr_NoMemory();
    return -1;
}

/* Take the sampler lock from a Python-facing method (GIL held): never block on it with
   the GIL, since the lock's holder may be waiting for the GIL. */
static void sampler_lock_gil(Sampler *s)
{
    if (pthread_mutex_trylock(&s->lock) == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&s->lock);
    Py_END_ALLOW_THREADS
}

static void release_raw_frames(JSRuntime *rt, RawFrame *frames, size_t n)
{
    for (size_t i = 0; i < n; i++)
        JS_FreeValueRT(rt, JS_MKPTR(JS_TAG_OBJECT, frames[i].fn));
}

/* lock held, owner thread */
static void sampler_release_frames(Host *h)
{
    release_raw_frames(h->rt, h->s.frames, h->s.nframes);
    h->s.nframes = 0;
    h->s.nsamples = 0;
    h->s.prev_depth = 0;
}

static void sampler_stop_thread(Host *h)
{
    if (!h->s.thread_started)
        return;
    sampler_lock_gil(&h->s);
    /* idle ticks the (possibly 1 ms-paced) timer thread has not recorded yet */
    if (h->s.idle && mono_ms() >= h->s.next_due)
        sampler_due_locked(&h->s, mono_ms());
    h->s.running = 0;
    h->hot.counter_init = 0; /* QuickJS's own poll cadence again */
    h->hot.armed = 0;
    h->hot.watch = 0;
    sampler_clear_dues(&h->s);
    pthread_cond_signal(&h->s.cond);
    pthread_mutex_unlock(&h->s.lock);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(h->s.thread, NULL);
    Py_END_ALLOW_THREADS
    h->s.thread_started = 0;
}

static void sampler_free_buffers(Host *h)
{
    sampler_release_frames(h);
    if (h->s.samples)
        munmap(h->s.samples, h->s.map_samples);
    if (h->s.frames)
        munmap(h->s.frames, h->s.map_frames);
    if (h->s.spare_samples)
        munmap(h->s.spare_samples, h->s.map_samples);
    if (h->s.spare_frames)
        munmap(h->s.spare_frames, h->s.map_frames);
    free(h->s.walk);
    free(h->s.prev);
    h->s.samples = h->s.spare_samples = NULL;
    h->s.frames = h->s.spare_frames = NULL;
    h->s.walk = h->s.prev = NULL;
    h->s.cap_samples = h->s.cap_frames = 0;
}

static void Runtime_dealloc(RuntimeObject *self)
{
    Host *h = self->h;
    if (h) {
        sampler_stop_thread(h);
        sampler_free_buffers(h);
        host_clear_timers(h);
        clear_rejections(h);
        host_clear_error(h);
        JS_FreeValue(h->s.ctxs[0], h->dispatch_fn);
        Py_CLEAR(h->py_cb);
        for (int i = h->s.nctx - 1; i >= 0; i--)
            JS_FreeContext(h->s.ctxs[i]);
        JS_FreeRuntime(h->rt);
        pthread_mutex_destroy(&h->s.lock);
        pthread_cond_destroy(&h->s.cond);
        pthread_mutex_destroy(&h->park_lock);
        pthread_cond_destroy(&h->park_cond);
        free(h);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Host *get_host(RuntimeObject *self)
{
    if (!self->h) {
        PyErr_SetString(PyExc_RuntimeError, "Runtime not initialised");
        return NULL;
    }
    if (self->h->busy && !(self->h->in_cb && pthread_equal(self->h->cb_thread, pthread_self())) &&
        !(self->h->lent && pthread_equal(self->h->lent_to, pthread_self()))) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this QuickJS runtime is already running JavaScript (one thread at a time)");
        return NULL;
    }
    return self->h;
}

static PyObject *to_python(JSContext *ctx, JSValueConst v)
{
    switch (JS_VALUE_GET_TAG(v)) {
    case JS_TAG_BOOL:
        return PyBool_FromLong(JS_VALUE_GET_BOOL(v));
    case JS_TAG_INT:
        return PyLong_FromLong(JS_VALUE_GET_INT(v));
    case JS_TAG_FLOAT64:
        return PyFloat_FromDouble(JS_VALUE_GET_FLOAT64(v));
    case JS_TAG_STRING: {
        size_t len;
        const char *s = JS_ToCStringLen(ctx, &len, v);
        PyObject *r;
        if (!s) {
            JS_FreeValue(ctx, JS_GetException(ctx));
            Py_RETURN_NONE;
        }
        r = PyUnicode_DecodeUTF8(s, len, "replace");
        JS_FreeCString(ctx, s);
        return r;
    }
    default:
        Py_RETURN_NONE;
    }
}

static PyObject *raise_host_error(Host *h)
{
    int kind = h->err_kind;
    if (kind == 2) {
        host_clear_error(h);
        atomic_store(&h->interrupt_req, 0);
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (ensure_error_types() < 0) {
        host_clear_error(h);
        return NULL;
    }
    {
        PyObject *e = PyObject_CallFunction(JSErrorType, "sss", h->err_message ? h->err_message : "",
                                            h->err_stack ? h->err_stack : "",
                                            h->err_name ? h->err_name : "Error");
        int compile = h->err_compile;
        host_clear_error(h);
        if (e && compile && PyObject_SetAttrString(e, "compile", Py_True) < 0)
            Py_CLEAR(e);
        if (e) {
            PyErr_SetObject(JSErrorType, e);
            Py_DECREF(e);
        }
    }
    return NULL;
}

static PyObject *Runtime_eval(RuntimeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "filename", "module", "catch_sigint", "context", NULL};
    const char *src, *filename = "<input>";
    Py_ssize_t len;
    int module = -1, catch_sigint = 0, context = 0;
    JSContext *main_ctx, *rctx;
    Host *h = get_host(self);
    JSValue r;
    PyObject *ret;
    struct sigaction sa, old;
    char *fname;

    if (!h)
        return NULL;
    if (h->busy) {
        /* From a host callback of the running eval: a nested run would end by marking the
           runtime free while the outer one still runs in it. */
        PyErr_SetString(PyExc_RuntimeError,
                        "eval() inside a host callback of this runtime's running eval is not "
                        "allowed; run it after eval() returns");
        return NULL;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|sipi", kwlist, &src, &len, &filename, &module,
                                     &catch_sigint, &context))
        return NULL;
    if (context < 0 || context >= h->s.nctx) {
        PyErr_SetString(PyExc_ValueError, "no such context");
        return NULL;
    }
    /* a second realm runs through the same host; h->ctx is the realm of this eval */
    main_ctx = h->ctx;
    h->ctx = h->s.ctxs[context];
    if (module < 0) {
        size_t fl = strlen(filename);
        module = (fl > 4 && strcmp(filename + fl - 4, ".mjs") == 0) || JS_DetectModule(src, len);
    }
    fname = strdup(filename);
    if (!fname) {
        h->ctx = main_ctx;
        return PyErr_NoMemory();
    }
    h->busy = 1;
    /* interrupt() stops the eval in progress; one left over from before doesn't count */
    atomic_store(&h->interrupt_req, 0);
    h->catch_sigint = catch_sigint;
    if (catch_sigint) {
        /* Python's own handler can't run while we hold no GIL; a tiny C handler sets a flag
           the interrupt handler and the event loop check. */
        g_sigint = 0;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old);
    }
    Py_BEGIN_ALLOW_THREADS
    r = host_eval(h, src, (size_t)len, fname, module);
    Py_END_ALLOW_THREADS
    free(fname);
    rctx = h->ctx;
    h->ctx = main_ctx;
    if (catch_sigint) {
        sigaction(SIGINT, &old, NULL);
        if (g_sigint && h->err_kind == 2) {
            g_sigint = 0;
            h->catch_sigint = 0;
            host_clear_error(h);
            h->busy = 0;
            pthread_mutex_lock(&h->park_lock);
            pthread_cond_broadcast(&h->park_cond);
            pthread_mutex_unlock(&h->park_lock);
            JS_FreeValue(rctx, r);
            /* hand the signal to Python's handler (KeyboardInterrupt by default) */
            PyErr_SetInterrupt();
            if (PyErr_CheckSignals() < 0)
                return NULL;
            PyErr_SetNone(PyExc_KeyboardInterrupt);
            return NULL;
        }
    }
    h->catch_sigint = 0;
    h->busy = 0;
    pthread_mutex_lock(&h->park_lock); /* borrowers waiting for a poll: the eval is over */
    pthread_cond_broadcast(&h->park_cond);
    pthread_mutex_unlock(&h->park_lock);
    if (h->err_kind) {
        JS_FreeValue(rctx, r);
        return raise_host_error(h);
    }
    ret = to_python(rctx, r);
    JS_FreeValue(rctx, r);
    return ret;
}

/* set_memory_limit(bytes): QuickJS's own allocation limit for this runtime (0: none). An
   allocation past it fails and the script gets InternalError: out of memory. */
static PyObject *Runtime_set_memory_limit(RuntimeObject *self, PyObject *arg)
{
    Host *h = get_host(self);
    Py_ssize_t n;
    if (!h)
        return NULL;
    n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "memory limit must be >= 0 bytes (0: none)");
        return NULL;
    }
    JS_SetMemoryLimit(h->rt, (size_t)n);
    Py_RETURN_NONE;
}

static PyObject *Runtime_get_memory_used(RuntimeObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(self->h ? self->h->rt->malloc_state.malloc_size : 0);
}

static PyObject *Runtime_interrupt(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    /* thread-safe: may be called from any thread while JS runs */
    Host *h = self->h;
    if (h) {
        atomic_store(&h->interrupt_req, 1);
        sampler_poke(&h->s);
    }
    Py_RETURN_NONE;
}

static PyObject *Runtime_now(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->h)
        return PyFloat_FromDouble(0);
    return PyFloat_FromDouble(mono_ms() - self->h->ctx->time_origin);
}

static PyObject *Runtime_get_time_origin(RuntimeObject *self, void *c)
{
    (void)c;
    return PyFloat_FromDouble(self->h ? self->h->time_origin_epoch : 0);
}

static PyObject *Runtime_sampler_start(RuntimeObject *self, PyObject *args)
{
    double interval;
    Py_ssize_t capacity;
    int cpu = 0;
    Host *h = get_host(self);
    if (!h)
        return NULL;
    if (!PyArg_ParseTuple(args, "dn|p", &interval, &capacity, &cpu))
        return NULL;
    if (!(interval > 0) || !isfinite(interval) || capacity <= 0) {
        PyErr_SetString(PyExc_ValueError,
                        "interval must be a finite number > 0 ms and capacity > 0 samples");
        return NULL;
    }
    if (capacity > MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError,
                     "capacity %zd samples is more than the sampler holds (at most %zd)",
                     capacity, MAX_CAPACITY);
        return NULL;
    }
    if (h->s.thread_started) {
        PyErr_SetString(PyExc_RuntimeError, "sampler already running");
        return NULL;
    }
    sampler_free_buffers(h);
    h->s.map_samples = ((size_t)capacity + 1) * sizeof(RawSample);
    /* delta-encoded stacks need few new frames per sample (only what changed since the
       previous one, leaf side); 16 on average plus 1M spare covers deep stacks changing
       near the root. Virtual memory only until used. */
    h->s.cap_frames = (size_t)capacity * 16 + (1u << 20);
    if (h->s.cap_frames > MAX_RAW_FRAMES)
        h->s.cap_frames = MAX_RAW_FRAMES;
    h->s.map_frames = h->s.cap_frames * sizeof(RawFrame);
    h->s.samples = map_zero(h->s.map_samples);
    h->s.frames = map_zero(h->s.map_frames);
    h->s.spare_samples = map_zero(h->s.map_samples);
    h->s.spare_frames = map_zero(h->s.map_frames);
    h->s.walk = malloc(sizeof(RawFrame) * MAX_DEPTH);
    h->s.prev = malloc(sizeof(RawFrame) * MAX_DEPTH);
    if (!h->s.samples || !h->s.frames || !h->s.spare_samples || !h->s.spare_frames ||
        !h->s.walk || !h->s.prev) {
        sampler_free_buffers(h);
        PyErr_NoMemory();
        return NULL;
    }
    h->s.cap_samples = (size_t)capacity;
    h->s.nsamples = h->s.nframes = 0;
    h->s.prev_depth = 0;
    h->s.full = 0;
    h->s.dropped = 0;
    h->s.stall_dropped = 0;
    h->s.offcpu_dropped = 0;
    h->s.run_ok = 0;
    h->s.truncated = 0;
    h->s.native_captures = 0;
    h->s.notify_at = 0;
    atomic_store(&h->s.check_due, 0);
    atomic_store(&h->s.pending, 0);
    h->s.interval_ms = interval;
    h->s.interval_changed = 0;
    if (interval < g_self_below_ms)
        calibrate_ticks();
    pthread_once(&g_rseq_once, rseq_init);
    h->s.running = 1;
    h->s.start_mono = mono_ms();
    h->s.next_due = h->s.start_mono + interval;
    /* the CPU clock starts at 0 now, running if an eval runs JS (the caller is its own
       thread, or borrows the runtime while that thread is parked) */
    h->s.cpu = cpu;
    h->s.cpu_in = 0;
    h->s.cpu_acc = h->s.cpu_seen = 0;
    h->s.cpu_next = interval;
    h->s.rng = (jsprof_ticks() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)h) | 1;
    sampler_draw_take(&h->s);
    h->s.wall_seen = h->s.start_mono;
    h->s.pending_first_cpu = h->s.pending_last_cpu = 0;
    sampler_cpu_in_locked(&h->s, !h->s.idle);
    sampler_set_mode(&h->s, interval);
    if (pthread_create(&h->s.thread, NULL, sampler_thread, &h->s) != 0) {
        h->s.running = 0;
        h->hot.armed = 0;
        h->hot.watch = 0;
        sampler_clear_dues(&h->s);
        h->hot.counter_init = 0;
        sampler_free_buffers(h);
        PyErr_SetString(PyExc_OSError, "could not start the sampler thread");
        return NULL;
    }
    h->s.thread_started = 1;
    Py_RETURN_NONE;
}

static PyObject *Runtime_sampler_set_interval(RuntimeObject *self, PyObject *args)
{
    double interval;
    Host *h = get_host(self);
    if (!h || !PyArg_ParseTuple(args, "d", &interval))
        return NULL;
    if (!(interval > 0) || !isfinite(interval)) {
        PyErr_SetString(PyExc_ValueError, "interval must be a finite number > 0 ms");
        return NULL;
    }
    if (interval < g_self_below_ms)
        calibrate_ticks();
    sampler_lock_gil(&self->h->s);
    self->h->s.interval_ms = interval;
    /* the grid restarts now (the timer thread sees interval_changed as well) */
    self->h->s.next_due = mono_ms() + interval;
    if (self->h->s.cpu) {
        Sampler *s = &self->h->s;
        s->cpu_seen = runtime_cpu_locked(s);
        s->cpu_next = s->cpu_seen + interval;
        sampler_draw_take(s);
        s->wall_seen = s->next_due - interval;
    }
    sampler_set_mode(&self->h->s, interval);
    self->h->s.interval_changed = 1;
    pthread_cond_signal(&self->h->s.cond);
    pthread_mutex_unlock(&self->h->s.lock);
    Py_RETURN_NONE;
}

static PyObject *Runtime_new_context(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    Host *h = get_host(self);
    JSContext *c;
    if (!h)
        return NULL;
    if (h->s.nctx >= MAX_CTX) {
        PyErr_SetString(PyExc_RuntimeError, "too many contexts in this runtime");
        return NULL;
    }
    c = JS_NewContext(h->rt);
    if (!c)
        return PyErr_NoMemory();
    if (host_install_globals(c) < 0) {
        JS_FreeValue(c, JS_GetException(c));
        JS_FreeContext(c);
        return PyErr_NoMemory();
    }
    sampler_lock_gil(&h->s); /* the timer thread pokes every context */
    h->s.ctxs[h->s.nctx++] = c;
    pthread_mutex_unlock(&h->s.lock);
    return PyLong_FromLong(h->s.nctx - 1);
}

/* Take a sample now, on the owner thread (the spec's constructor takes the first sample):
   the current JS stack, or an empty sample when no JS runs. */
static PyObject *Runtime_sampler_sample_now(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    Host *h = get_host(self);
    Sampler *s;
    if (!h)
        return NULL;
    s = &h->s;
    sampler_lock_gil(s);
    if (s->running && mono_ms() >= s->next_due) {
        /* ticks already due (a self-sampling timer thread looks only every millisecond)
           go first, so due times stay increasing */
        if (sampler_due_locked(s, mono_ms()) && !s->idle && h->rt->current_stack_frame)
            sampler_capture_locked(s, h->rt, CAPTURE_OTHER);
    }
    if (s->running && !s->full && !s->held) {
        double now = sampler_now(s);
        if (!s->idle && h->rt->current_stack_frame) {
            double cpu = s->cpu ? runtime_cpu_locked(s) : 0;
            if (atomic_load(&s->pending) == 0) {
                s->pending_first_due = now;
                s->pending_first_cpu = cpu;
            }
            s->pending_last_due = now;
            s->pending_last_cpu = cpu;
            atomic_fetch_add(&s->pending, 1);
            sampler_capture_locked(s, h->rt, CAPTURE_OTHER);
        } else if (!s->cpu) { /* the CPU clock: idle is no sample at all */
            sampler_flush_pending_idle_locked(s);
            sampler_push(s, now, now, 0, 0, SAMPLE_IDLE);
        }
    }
    pthread_mutex_unlock(&s->lock);
    Py_RETURN_NONE;
}

static PyObject *Runtime_sampler_script_window(RuntimeObject *self, PyObject *args)
{
    int on;
    Host *h = get_host(self);
    if (!h || !PyArg_ParseTuple(args, "p", &on))
        return NULL;
    if (h->busy) { /* from a host callback: the window of the running eval is open */
        PyErr_SetString(PyExc_RuntimeError, "set the script window before eval(), not during");
        return NULL;
    }
    sampler_lock_gil(&h->s);
    h->s.window = on;
    h->s.held = on;
    pthread_mutex_unlock(&h->s.lock);
    Py_RETURN_NONE;
}

static PyObject *Runtime_sampler_notify_at(RuntimeObject *self, PyObject *args)
{
    Py_ssize_t n;
    if (!get_host(self) || !PyArg_ParseTuple(args, "n", &n))
        return NULL;
    sampler_lock_gil(&self->h->s);
    self->h->s.notify_at = n > 0 ? (size_t)n : 0;
    if (n > 0 && self->h->s.nsamples >= (size_t)n)
        atomic_store(&self->h->s.check_due, 1);
    pthread_mutex_unlock(&self->h->s.lock);
    Py_RETURN_NONE;
}

static PyObject *Runtime_request_check(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    if (self->h)
        atomic_store(&self->h->s.check_due, 1);
    Py_RETURN_NONE;
}

/* borrow(timeout_s) -> bool, from a foreign thread while an eval runs: wait (GIL
   released) until the owner parks at its next poll or event-loop turn, then this thread
   may use the runtime until give_back(). False when the eval ended first or on timeout. */
static PyObject *Runtime_borrow(RuntimeObject *self, PyObject *args)
{
    Host *h = self->h;
    double timeout;
    int ok = 0;
    struct timespec until;
    if (!h) {
        PyErr_SetString(PyExc_RuntimeError, "Runtime not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "d", &timeout))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_MONOTONIC, &until);
    {
        double t = (double)until.tv_sec + until.tv_nsec / 1e9 + (timeout > 0 ? timeout : 0);
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    }
    pthread_mutex_lock(&h->park_lock);
    h->want++;
    for (;;) {
        if (h->parked && !h->lent) {
            ok = 1;
            break;
        }
        if (!h->busy)
            break;
        /* (again each time: a poke can be lost to the interpreter's own decrement) */
        atomic_store(&h->owner_req, 1);
        sampler_poke(&h->s);
        {
            struct timespec step;
            clock_gettime(CLOCK_MONOTONIC, &step);
            step.tv_nsec += 20000000; /* look again every 20 ms */
            if (step.tv_nsec >= 1000000000L) {
                step.tv_sec++;
                step.tv_nsec -= 1000000000L;
            }
            if (step.tv_sec > until.tv_sec ||
                (step.tv_sec == until.tv_sec && step.tv_nsec > until.tv_nsec))
                step = until;
            if (pthread_cond_timedwait(&h->park_cond, &h->park_lock, &step) == ETIMEDOUT &&
                (step.tv_sec == until.tv_sec && step.tv_nsec == until.tv_nsec) &&
                !(h->parked && !h->lent))
                break;
        }
    }
    h->want--;
    if (ok) {
        h->lent = 1;
        h->lent_to = pthread_self();
        /* JS's stack checks measure this thread's stack while it holds the runtime */
        h->owner_stack_top = h->rt->stack_top;
        h->owner_stack_limit = h->rt->stack_limit;
        JS_UpdateStackTop(h->rt);
    }
    pthread_cond_broadcast(&h->park_cond);
    pthread_mutex_unlock(&h->park_lock);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok);
}

static PyObject *Runtime_give_back(RuntimeObject *self, PyObject *unused)
{
    Host *h = self->h;
    (void)unused;
    if (!h || !h->lent || !pthread_equal(h->lent_to, pthread_self())) {
        PyErr_SetString(PyExc_RuntimeError, "give_back() without borrow()");
        return NULL;
    }
    pthread_mutex_lock(&h->park_lock);
    h->rt->stack_top = h->owner_stack_top;
    h->rt->stack_limit = h->owner_stack_limit;
    h->lent = 0;
    pthread_cond_broadcast(&h->park_cond);
    pthread_mutex_unlock(&h->park_lock);
    Py_RETURN_NONE;
}

static PyObject *Runtime_set_host_callback(RuntimeObject *self, PyObject *cb)
{
    if (!get_host(self))
        return NULL;
    Py_XINCREF(cb == Py_None ? NULL : cb);
    Py_XSETREF(self->h->py_cb, cb == Py_None ? NULL : cb);
    Py_RETURN_NONE;
}

static PyObject *Runtime_get_owner_here(RuntimeObject *self, void *c)
{
    /* True inside a host callback on the owner thread, or while this thread borrows it */
    (void)c;
    return PyBool_FromLong(
        self->h && ((self->h->in_cb && pthread_equal(self->h->cb_thread, pthread_self())) ||
                    (self->h->lent && pthread_equal(self->h->lent_to, pthread_self()))));
}

static PyObject *Runtime_sampler_stop(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    if (!get_host(self))
        return NULL;
    sampler_stop_thread(self->h);
    sampler_lock_gil(&self->h->s);
    atomic_store(&self->h->s.pending, 0);
    pthread_mutex_unlock(&self->h->s.lock);
    Py_RETURN_NONE;
}

/* --- drain: symbolise and intern on the owner thread --- */

typedef struct {
    uint64_t *keys;
    int32_t *vals;
    size_t cap, n;
} Map;

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int map_init(Map *m, size_t cap)
{
    m->cap = 1024;
    while (m->cap < cap * 2)
        m->cap <<= 1;
    m->n = 0;
    m->keys = malloc(sizeof(uint64_t) * m->cap);
    m->vals = malloc(sizeof(int32_t) * m->cap);
    if (!m->keys || !m->vals)
        return -1;
    memset(m->vals, 0xff, sizeof(int32_t) * m->cap); /* -1: empty */
    return 0;
}

static void map_free(Map *m)
{
    free(m->keys);
    free(m->vals);
}

/* returns the slot for key; *found says whether it was there */
static size_t map_slot(Map *m, uint64_t key, int *found)
{
    size_t i = mix64(key) & (m->cap - 1);
    while (m->vals[i] != -1) {
        if (m->keys[i] == key) {
            *found = 1;
            return i;
        }
        i = (i + 1) & (m->cap - 1);
    }
    *found = 0;
    return i;
}

static int map_grow(Map *m)
{
    Map n2;
    if (m->n * 2 < m->cap)
        return 0;
    if (map_init(&n2, m->cap) < 0) {
        map_free(&n2);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->vals[i] != -1) {
            int f;
            size_t j = map_slot(&n2, m->keys[i], &f);
            n2.keys[j] = m->keys[i];
            n2.vals[j] = m->vals[i];
            n2.n++;
        }
    }
    map_free(m);
    *m = n2;
    return 0;
}

static PyObject *py_str_atom(JSContext *ctx, JSAtom atom)
{
    const char *s;
    PyObject *r;
    if (atom == JS_ATOM_NULL)
        return PyUnicode_FromString("");
    s = JS_AtomToCString(ctx, atom);
    if (!s) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return PyUnicode_FromString("");
    }
    r = PyUnicode_DecodeUTF8(s, strlen(s), "replace");
    JS_FreeCString(ctx, s);
    return r;
}

/* The ECMAScript `name` of a function: its own `name` data property (set by the engine for
   inferred names, `get x`, class and static methods); never calls a getter. Top-level
   script/module code is ''. */
static PyObject *function_name(JSContext *ctx, JSObject *p)
{
    JSFunctionBytecode *b = p->u.func.function_bytecode;
    JSPropertyDescriptor desc;
    JSValue fn = JS_MKPTR(JS_TAG_OBJECT, p);
    int r;
    if (b->func_name == JS_ATOM__eval_)
        return PyUnicode_FromString("");
    r = JS_GetOwnProperty(ctx, &desc, fn, JS_ATOM_name);
    if (r < 0) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        r = 0;
    }
    if (r > 0) {
        PyObject *res = NULL;
        if (!(desc.flags & JS_PROP_GETSET) && JS_IsString(desc.value)) {
            size_t len;
            const char *s = JS_ToCStringLen(ctx, &len, desc.value);
            if (s) {
                res = PyUnicode_DecodeUTF8(s, len, "replace");
                JS_FreeCString(ctx, s);
                if (!res) {
                    JS_FreeValue(ctx, desc.value);
                    JS_FreeValue(ctx, desc.getter);
                    JS_FreeValue(ctx, desc.setter);
                    return NULL; /* MemoryError */
                }
            } else {
                JS_FreeValue(ctx, JS_GetException(ctx));
            }
        }
        JS_FreeValue(ctx, desc.value);
        JS_FreeValue(ctx, desc.getter);
        JS_FreeValue(ctx, desc.setter);
        if (res)
            return res;
    }
    return py_str_atom(ctx, b->func_name);
}

/* A 1-based line or column, or None for QuickJS's 0 (no position) */
static PyObject *position_of(int n)
{
    return n > 0 ? PyLong_FromLong(n) : Py_NewRef(Py_None);
}

static PyObject *bytes_of(const void *p, size_t n)
{
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* --- the line charged to a frame --- */

/* the target of a jump instruction at `pos` (0: not a jump) */
static int jump_target(const uint8_t *buf, uint32_t pos, uint32_t *target)
{
    int32_t off;
    switch (buf[pos]) {
    case OP_goto:
    case OP_if_true:
    case OP_if_false:
        off = (int32_t)get_u32(buf + pos + 1);
        break;
    case OP_goto16:
        off = (int16_t)get_u16(buf + pos + 1);
        break;
    case OP_goto8:
    case OP_if_true8:
    case OP_if_false8:
        off = (int8_t)buf[pos + 1];
        break;
    default:
        return 0;
    }
    *target = (uint32_t)((int64_t)pos + 1 + off);
    return 1;
}

static inline uint32_t insn_len(const uint8_t *buf, uint32_t pos)
{
    uint32_t n = short_opcode_info(buf[pos]).size;
    return n ? n : 1;
}

static int line_at(JSContext *ctx, JSFunctionBytecode *b, uint32_t pos)
{
    int col;
    return find_line_num(ctx, b, pos, &col);
}

/* The line and column of the first instruction of `b` that has a position (0, 0: none
   in its first 256 instructions); once per distinct function, so the rescans are cheap */
static void first_position(JSContext *ctx, JSFunctionBytecode *b, int *line, int *col)
{
    uint32_t pos = 0;
    *line = *col = 0;
    for (int n = 0; n < 256 && pos < (uint32_t)b->byte_code_len; n++) {
        int c, l = find_line_num(ctx, b, pos, &c);
        if (l > 0) {
            *line = l;
            *col = c;
            return;
        }
        pos += insn_len(b->byte_code_buf, pos);
    }
}

/* The line of a frame stopped at `pc` (the end of the instruction executing: a call, or a
   poll). The interpreter polls only at calls and branches, so in a loop whose body makes
   no call every sample is taken at the loop's own branches (the test's conditional jump,
   the backward jump), which carry the loop *header's* line. The time between two such
   polls is one iteration, spent mostly in the body: a poll at a branch on the header's
   line is charged to the body's last line (the last line inside the loop that is not the
   header's). A loop written on one line keeps that line. */
static int frame_line_of(JSContext *ctx, JSFunctionBytecode *b, uint32_t pc)
{
    const uint8_t *buf = b->byte_code_buf;
    uint32_t len = (uint32_t)b->byte_code_len, pos = 0, ipos = UINT32_MAX, t, loop_t, loop_g;
    int line, head, body = -1;
    if (pc == 0 || pc > len)
        return line_at(ctx, b, 0);
    while (pos < pc) {
        uint32_t n = insn_len(buf, pos);
        if (pos + n == pc) {
            ipos = pos;
            break;
        }
        pos += n;
    }
    if (ipos == UINT32_MAX)
        return line_at(ctx, b, pc - 1);
    line = line_at(ctx, b, ipos);
    if (!jump_target(buf, ipos, &t))
        return line;
    if (t <= ipos) { /* a backward jump: the loop is [t, ipos] */
        loop_t = t;
        loop_g = ipos;
    } else { /* a forward branch: inside the loop whose backward jump comes later? */
        loop_g = UINT32_MAX;
        for (pos = ipos; pos < len; pos += insn_len(buf, pos)) {
            uint32_t t2;
            if (jump_target(buf, pos, &t2) && t2 <= ipos) {
                loop_g = pos;
                loop_t = t2;
                break;
            }
        }
        if (loop_g == UINT32_MAX)
            return line;
    }
    head = line_at(ctx, b, loop_t);
    if (line != head)
        return line; /* a branch in the body (an `if`): its own line */
    for (pos = loop_t; pos < loop_g; pos += insn_len(buf, pos)) {
        int l = line_at(ctx, b, pos);
        if (l != head)
            body = l;
    }
    return body >= 0 ? body : line;
}

/* --- drain: symbolise and intern on the owner thread --- */

static PyObject *Runtime_sampler_drain(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    Host *h = get_host(self);
    Sampler *s;
    JSContext *ctx;
    size_t ns, nf;
    Map fmap = {0}, smap = {0}, lmap = {0};
    PyObject *funcs = NULL, *out = NULL;
    double *ts = NULL, *due = NULL, *cap = NULL, *cpu = NULL;
    int32_t *stack = NULL, *line = NULL, *sparent = NULL, *sfunc = NULL, *cur = NULL;
    int32_t *cur_line = NULL;
    uint8_t *flags = NULL;
    int32_t *frame_func = NULL, *frame_line = NULL;
    size_t nstacks = 0;
    uint32_t depth = 0;
    double last_ts = -1e300;
    int full;
    uint64_t dropped, stall_dropped, offcpu_dropped, truncated, native_caps;
    RawSample *rs;
    RawFrame *rf;
    size_t limit;

    if (!h)
        return NULL;
    s = &h->s;
    ctx = h->ctx;
    if (s->draining) {
        PyErr_SetString(PyExc_RuntimeError, "sampler_drain() is already running");
        return NULL;
    }
    /* Swap the raw buffers under the lock; symbolise the old ones after unlocking, so the
       timer thread and the interpreter's capture never wait on Python or on JS lookups. */
    sampler_lock_gil(s);
    rs = s->samples;
    rf = s->frames;
    ns = s->nsamples;
    nf = s->nframes;
    full = s->full;
    dropped = s->dropped;
    stall_dropped = s->stall_dropped;
    offcpu_dropped = s->offcpu_dropped;
    truncated = s->truncated;
    native_caps = s->native_captures;
    s->samples = s->spare_samples;
    s->frames = s->spare_frames;
    s->spare_samples = rs;
    s->spare_frames = rf;
    s->nsamples = s->nframes = 0;
    s->prev_depth = 0; /* the next capture starts a fresh delta chain */
    s->full = 0;
    s->dropped = s->stall_dropped = s->offcpu_dropped = s->truncated = s->native_captures = 0;
    s->draining = 1;
    pthread_mutex_unlock(&s->lock);
    /* Symbolising reads names through QuickJS (small strings, freed at once): a script
       stopped at its memory limit must still get a trace with names, so the limit is
       lifted meanwhile (this thread owns the runtime: no JavaScript runs now). */
    limit = h->rt->malloc_state.malloc_limit;
    h->rt->malloc_state.malloc_limit = 0;

    funcs = PyList_New(0);
    ts = malloc(sizeof(double) * (ns + 1));
    due = malloc(sizeof(double) * (ns + 1));
    cap = malloc(sizeof(double) * (ns + 1));
    cpu = malloc(sizeof(double) * (ns + 1));
    stack = malloc(sizeof(int32_t) * (ns + 1));
    line = malloc(sizeof(int32_t) * (ns + 1));
    flags = malloc(ns + 1);
    frame_func = malloc(sizeof(int32_t) * (nf + 1));
    frame_line = malloc(sizeof(int32_t) * (nf + 1));
    sparent = malloc(sizeof(int32_t) * (nf + 1));
    sfunc = malloc(sizeof(int32_t) * (nf + 1));
    cur = malloc(sizeof(int32_t) * (MAX_DEPTH + 1));
    cur_line = malloc(sizeof(int32_t) * (MAX_DEPTH + 1));
    if (!funcs || !ts || !due || !cap || !cpu || !stack || !line || !flags || !frame_func ||
        !frame_line || !sparent || !sfunc || !cur || !cur_line || map_init(&fmap, 1024) < 0 ||
        map_init(&smap, 1024) < 0 || map_init(&lmap, 1024) < 0)
        goto nomem;
    /* 1. functions: distinct objects -> index, with their symbol info; frame lines */
    for (size_t i = 0; i < nf; i++) {
        JSObject *p = rf[i].fn;
        JSFunctionBytecode *b = p->u.func.function_bytecode;
        int found;
        size_t slot;
        uint32_t pc = rf[i].pc;
        uint64_t lkey;
        if (map_grow(&fmap) < 0 || map_grow(&lmap) < 0)
            goto nomem;
        slot = map_slot(&fmap, (uint64_t)(uintptr_t)p, &found);
        if (!found) {
            int realm = -1;
            PyObject *t;
            for (int k = 0; k < s->nctx; k++)
                if (s->ctxs[k] == b->realm)
                    realm = k;
            /* QuickJS gives functions it makes itself (class field initializers, static
               blocks' holder) line 0. Their code has positions, though: such a function is
               placed where its first positioned instruction is (the first field's line), so
               two classes' initializers in one file are told apart; one with none at all is
               reported without a position (the spec's line/column are optional, 1-based)
               rather than an invalid 0 */
            int fline = b->line_num, fcol = b->line_num > 0 ? b->col_num : 0;
            if (fline <= 0)
                first_position(ctx, b, &fline, &fcol);
            t = Py_BuildValue("(NNNNi)", function_name(ctx, p), py_str_atom(ctx, b->filename),
                              position_of(fline), position_of(fline > 0 ? fcol : 0), realm);
            if (!t || PyList_Append(funcs, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
            fmap.keys[slot] = (uint64_t)(uintptr_t)p;
            fmap.vals[slot] = (int32_t)(PyList_GET_SIZE(funcs) - 1);
            fmap.n++;
        }
        frame_func[i] = fmap.vals[slot];
        /* one line lookup per distinct (function, pc) */
        lkey = ((uint64_t)(uint32_t)frame_func[i] << 32) | pc;
        slot = map_slot(&lmap, lkey, &found);
        if (!found) {
            lmap.keys[slot] = lkey;
            lmap.vals[slot] = frame_line_of(ctx, b, pc);
            lmap.n++;
        }
        frame_line[i] = lmap.vals[slot];
    }
    /* 2. replay the delta-encoded stacks; intern (parent, func) into a trie */
    {
        size_t fi = 0;
        for (size_t i = 0; i < ns; i++) {
            RawSample *r = &rs[i];
            uint32_t nnew = r->nnew & SAMPLE_NNEW_MASK;
            double t;
            flags[i] = ((r->nnew & SAMPLE_DEFERRED) ? 1 : 0) | ((r->nnew & SAMPLE_IDLE) ? 2 : 0) |
                       ((r->nnew & SAMPLE_NATIVE) ? 4 : 0) | ((r->nnew & SAMPLE_GC) ? 8 : 0);
            due[i] = r->due;
            cap[i] = r->cap;
            cpu[i] = r->cpu;
            /* a deferred tick is stamped at its due time: the stack was this one then */
            t = (r->nnew & SAMPLE_DEFERRED) ? r->due : r->cap;
            if (t <= last_ts)
                t = last_ts + 1e-6; /* strictly increasing timestamps */
            ts[i] = last_ts = t;
            if (r->nnew & (SAMPLE_IDLE | SAMPLE_GC)) {
                stack[i] = -1;
                line[i] = 0;
                continue; /* idle and GC samples leave the delta chain untouched */
            }
            depth = r->keep;
            for (uint32_t k = 0; k < nnew && fi < nf; k++, fi++) {
                int32_t parent = depth ? cur[depth - 1] : -1;
                uint64_t key = ((uint64_t)(uint32_t)(parent + 1) << 32) | (uint32_t)frame_func[fi];
                int found;
                size_t slot;
                if (map_grow(&smap) < 0)
                    goto nomem;
                slot = map_slot(&smap, key, &found);
                if (!found) {
                    smap.keys[slot] = key;
                    smap.vals[slot] = (int32_t)nstacks;
                    smap.n++;
                    sparent[nstacks] = parent;
                    sfunc[nstacks] = frame_func[fi];
                    nstacks++;
                }
                cur_line[depth] = frame_line[fi];
                cur[depth++] = smap.vals[slot];
            }
            stack[i] = depth ? cur[depth - 1] : -1;
            line[i] = depth ? cur_line[depth - 1] : 0;
        }
    }
    out = Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:O,s:K,s:K,s:K,s:K,s:K}",
                        "funcs", funcs,
                        "stack_parent", bytes_of(sparent, sizeof(int32_t) * nstacks),
                        "stack_func", bytes_of(sfunc, sizeof(int32_t) * nstacks),
                        "ts", bytes_of(ts, sizeof(double) * ns),
                        "due", bytes_of(due, sizeof(double) * ns),
                        "cap", bytes_of(cap, sizeof(double) * ns),
                        "cpu", bytes_of(cpu, sizeof(double) * ns),
                        "stack", bytes_of(stack, sizeof(int32_t) * ns),
                        "line", bytes_of(line, sizeof(int32_t) * ns),
                        "flags", bytes_of(flags, ns),
                        "full", full ? Py_True : Py_False,
                        "dropped", (unsigned long long)dropped,
                        "stall_dropped", (unsigned long long)stall_dropped,
                        "offcpu_dropped", (unsigned long long)offcpu_dropped,
                        "truncated", (unsigned long long)truncated,
                        "native_captures", (unsigned long long)native_caps);
    funcs = NULL; /* stolen by Py_BuildValue, also when it failed */
    goto done;
nomem:
    PyErr_NoMemory();
fail:
    Py_XDECREF(funcs);
    out = NULL;
done:
    /* release the references the raw frames held; give back big buffers' pages */
    release_raw_frames(h->rt, rf, nf);
    if (nf * sizeof(RawFrame) > (4u << 20))
        madvise(rf, nf * sizeof(RawFrame), MADV_DONTNEED);
    if (ns * sizeof(RawSample) > (4u << 20))
        madvise(rs, ns * sizeof(RawSample), MADV_DONTNEED);
    s->draining = 0;
    h->rt->malloc_state.malloc_limit = limit;
    free(ts);
    free(due);
    free(cap);
    free(cpu);
    free(stack);
    free(line);
    free(flags);
    free(frame_func);
    free(frame_line);
    free(sparent);
    free(sfunc);
    free(cur);
    free(cur_line);
    map_free(&fmap);
    map_free(&smap);
    map_free(&lmap);
    return out;
}

static PyObject *Runtime_get_sampler_running(RuntimeObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->h && self->h->s.thread_started);
}

/* For a live status line, from any thread and without the lock: a relaxed read that may
   lag the sampler by a sample, never blocks it. */
static PyObject *Runtime_get_sampler_pending(RuntimeObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(self->h ? __atomic_load_n(&self->h->s.nsamples, __ATOMIC_RELAXED)
                                     : 0);
}

/* The runtime's CPU ms since sampler_start on the CPU clock (0 otherwise): where a
   session's first sample's weight starts counting. */
static PyObject *Runtime_get_sampler_cpu(RuntimeObject *self, void *c)
{
    double v = 0;
    (void)c;
    if (self->h && self->h->s.cpu && self->h->s.running) {
        sampler_lock_gil(&self->h->s);
        v = runtime_cpu_locked(&self->h->s);
        pthread_mutex_unlock(&self->h->s.lock);
    }
    return PyFloat_FromDouble(v);
}

static PyMethodDef Runtime_methods[] = {
    {"eval", (PyCFunction)(void (*)(void))Runtime_eval, METH_VARARGS | METH_KEYWORDS,
     "eval(source, filename='<input>', module=-1, catch_sigint=False): run to completion "
     "(promise jobs and timers included), GIL released. module=-1 detects."},
    {"interrupt", (PyCFunction)Runtime_interrupt, METH_NOARGS,
     "Make the running eval stop with KeyboardInterrupt (thread-safe)."},
    {"now", (PyCFunction)Runtime_now, METH_NOARGS, "performance.now() of this runtime (ms)."},
    {"sampler_start", (PyCFunction)Runtime_sampler_start, METH_VARARGS,
     "sampler_start(interval_ms, capacity, cpu=False): cpu ticks on the runtime's CPU time"},
    {"sampler_set_interval", (PyCFunction)Runtime_sampler_set_interval, METH_VARARGS,
     "sampler_set_interval(interval_ms): change the tick while running"},
    {"sampler_stop", (PyCFunction)Runtime_sampler_stop, METH_NOARGS, "stop the timer thread"},
    {"sampler_script_window", (PyCFunction)Runtime_sampler_script_window, METH_VARARGS,
     "sampler_script_window(on): record only while an eval runs (its script, jobs and "
     "event-loop waits), not between evals"},
    {"sampler_drain", (PyCFunction)Runtime_sampler_drain, METH_NOARGS,
     "Symbolise and return the samples taken since the last drain (owner thread)."},
    {"new_context", (PyCFunction)Runtime_new_context, METH_NOARGS,
     "Create another realm (context) in this runtime; returns its index for eval(context=)."},
    {"sampler_sample_now", (PyCFunction)Runtime_sampler_sample_now, METH_NOARGS,
     "Record one sample now (owner thread)."},
    {"sampler_notify_at", (PyCFunction)Runtime_sampler_notify_at, METH_VARARGS,
     "sampler_notify_at(n): ask for a 'check' callback once n raw samples are held (0: never)."},
    {"request_check", (PyCFunction)Runtime_request_check, METH_NOARGS,
     "Ask for a 'check' callback at the owner's next event-loop turn."},
    {"borrow", (PyCFunction)Runtime_borrow, METH_VARARGS,
     "borrow(timeout_s) -> bool: wait until the running eval's owner thread parks at its "
     "next poll and use the runtime from this thread until give_back() (thread-safe)."},
    {"give_back", (PyCFunction)Runtime_give_back, METH_NOARGS,
     "Hand a borrowed runtime back to its owner thread."},
    {"set_memory_limit", (PyCFunction)Runtime_set_memory_limit, METH_O,
     "set_memory_limit(bytes): QuickJS's allocation limit for this runtime (0: none)."},
    {"set_host_callback", (PyCFunction)Runtime_set_host_callback, METH_O,
     "set_host_callback(fn(op, arg) -> str | None): the Python side of the host."},
    {NULL}};

static PyObject *Runtime_get_busy(RuntimeObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->h && self->h->busy);
}

static PyGetSetDef Runtime_getset[] = {
    {"busy", (getter)Runtime_get_busy, NULL, "True while an eval runs (on any thread)", NULL},
    {"memory_used", (getter)Runtime_get_memory_used, NULL,
     "bytes QuickJS has allocated for this runtime (what its memory limit counts)", NULL},
    {"time_origin", (getter)Runtime_get_time_origin, NULL,
     "performance.timeOrigin: Unix epoch ms of performance.now() == 0", NULL},
    {"sampler_running", (getter)Runtime_get_sampler_running, NULL, NULL, NULL},
    {"sampler_cpu", (getter)Runtime_get_sampler_cpu, NULL,
     "the CPU clock's reading (runtime CPU ms since sampler_start; 0 on the wall clock)", NULL},
    {"sampler_pending", (getter)Runtime_get_sampler_pending, NULL,
     "samples taken since the last drain (any thread, no lock: an estimate)", NULL},
    {"in_owner_callback", (getter)Runtime_get_owner_here, NULL,
     "True inside a host callback on the owner thread", NULL},
    {NULL}};

static PyTypeObject RuntimeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jsprof._quickjs.Runtime",
    .tp_basicsize = sizeof(RuntimeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A QuickJS-ng runtime with one context, a small host and a sampler.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Runtime_init,
    .tp_dealloc = (destructor)Runtime_dealloc,
    .tp_methods = Runtime_methods,
    .tp_getset = Runtime_getset,
};

static PyObject *set_repoke_us(PyObject *mod, PyObject *arg)
{
    (void)mod;
    double us = PyFloat_AsDouble(arg);
    if (us == -1 && PyErr_Occurred())
        return NULL;
    g_repoke_ms = us < 0 ? 0 : us / 1000.0;
    Py_RETURN_NONE;
}

static PyObject *set_tuning(PyObject *mod, PyObject *args)
{
    double below = g_self_below_ms, wake = g_self_wake_ms;
    (void)mod;
    if (!PyArg_ParseTuple(args, "dd", &g_self_below_ms, &g_self_wake_ms))
        return NULL;
    return Py_BuildValue("(dd)", below, wake); /* the previous values, to restore */
}

static PyObject *set_approach(PyObject *mod, PyObject *args)
{
    int n, prev = g_approach;
    double window = g_window_ms * 1000, divide = g_divide;
    (void)mod;
    if (!PyArg_ParseTuple(args, "i|dd", &n, &window, &divide))
        return NULL;
    if (n < 0 || n > 2 || !(window >= 0) || !(divide >= 1)) {
        PyErr_SetString(PyExc_ValueError, "approach is 0, 1 or 2; window_us >= 0; divide >= 1");
        return NULL;
    }
    g_approach = n;
    g_window_ms = window / 1000;
    g_divide = divide;
    return PyLong_FromLong(prev);
}

static PyObject *set_watch(PyObject *mod, PyObject *arg)
{
    int prev = g_watch;
    (void)mod;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    g_watch = n != 0;
    return PyLong_FromLong(prev);
}

static PyObject *watch_available(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    pthread_once(&g_rseq_once, rseq_init);
    return PyBool_FromLong(g_rseq_cs_off != 0);
}

static PyObject *set_max_depth(PyObject *mod, PyObject *arg)
{
    (void)mod;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1 || n > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "max depth must be in 1..%d", MAX_DEPTH);
        return NULL;
    }
    g_max_depth = (uint32_t)n;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_max_depth", set_max_depth, METH_O,
     "set_max_depth(n): the stack walker's depth limit (default and maximum MAX_DEPTH; tests)."},
    {"set_tuning", set_tuning, METH_VARARGS,
     "set_tuning(self_sample_below_ms, self_sample_wake_ms) -> previous values: self-sample "
     "below this interval (default: always; 0: the timer-thread mode), timer wake period."},
    {"set_approach", set_approach, METH_VARARGS,
     "set_approach(n, window_us=10, divide=4) -> previous n: how self-sampling closes in on "
     "a due time: 1 the approach (default), 0 every 1,000 polls only and "
     "frame exits not looking (as before it), 2 every poll and frame exit (a reference; "
     "costly). The wall clock takes it only where set_watch and rseq allow (see "
     "watch_available), else looks every 1,000 polls. Benchmarks and tests."},
    {"set_watch", set_watch, METH_O,
     "set_watch(on) -> previous: on the wall clock, whether a deschedule (rseq) makes the "
     "next frame exit look at the clock and self-sampling approach each due time (default "
     "1; 0: a look every 1,000 polls, as before it). Benchmarks and tests."},
    {"watch_available", watch_available, METH_NOARGS,
     "watch_available() -> bool: whether this kernel and libc show a thread's deschedules "
     "(rseq registered by glibc, and the kernel clears an armed rseq_cs)."},
    {"set_repoke_us", set_repoke_us, METH_O,
     "Delay (us) before the timer thread re-zeroes the interrupt counters of a pending tick (default 1; 0: no second write)."},
    {NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "jsprof._quickjs",
    "QuickJS-ng (patched) with jsprof's sampling profiler.", -1, module_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__quickjs(void)
{
    PyObject *m;
    if (PyType_Ready(&RuntimeType) < 0)
        return NULL;
    m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&RuntimeType);
    PyModule_AddObject(m, "Runtime", (PyObject *)&RuntimeType);
    PyModule_AddStringConstant(m, "QUICKJS_VERSION", JS_GetVersion());
    PyModule_AddIntConstant(m, "MAX_DEPTH", MAX_DEPTH);
    return m;
}
