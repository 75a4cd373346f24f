/* jsprof.formats._columns: JSON text to and from numpy columns, for the big per-sample
 * arrays of trace files. Python builds everything else of a document with orjson; the
 * samples array (millions of small objects) is where a dict per sample cost 3-6x a generic
 * parse. Only the buffer protocol is used: Python hands contiguous columns of the right
 * dtype and turns the returned bytearrays into numpy arrays (no numpy headers at build).
 *
 * Readers here never report errors: they return None when the text is not exactly what
 * they handle, and the Python caller falls back to its validating path, which words the
 * message (file, field, index). So every check below only has to be strict, not helpful.
 *
 * Numbers: a written float is the shortest decimal that reads back to the same double (the
 * digits of Python's repr), laid out as orjson lays it out, so that output is
 * byte-identical to orjson's for the same values. A read float is the correctly rounded
 * double of its decimal text, as orjson and msgspec read it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef unsigned __int128 u128;

/* Exact powers of ten as doubles (10^22 is the last one a double holds exactly). */
static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};
static const uint64_t POW10U[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
    10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL,
};
#define MAX_POW5 27 /* 5^27 < 2^63, so 2^55 * 5^27 fits 128 bits */
static uint64_t POW5[MAX_POW5 + 1];

/* The most samples a trace table holds (ids are int32 columns). */
#define MAX_ENTRIES 2147483647LL

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* ---- writing numbers ----------------------------------------------------------------- */

static inline int count_digits(uint64_t v) {
    /* log10 from the bit length (1233/4096 ~ log10(2)), corrected by one comparison */
    int t = ((64 - __builtin_clzll(v | 1)) * 1233) >> 12;
    int n = t + (v >= POW10U[t]);
    return n ? n : 1;
}

/* Exactly 8 digits of v < 10^8 at p, in 32-bit arithmetic. */
static inline void write_8(char *p, uint32_t v) {
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(p, DIGIT_PAIRS + 2 * (hi / 100), 2);
    memcpy(p + 2, DIGIT_PAIRS + 2 * (hi % 100), 2);
    memcpy(p + 4, DIGIT_PAIRS + 2 * (lo / 100), 2);
    memcpy(p + 6, DIGIT_PAIRS + 2 * (lo % 100), 2);
}

/* Digits of v < 10^8 at p, written backwards from p + n (n its digit count). */
static inline void write_small(char *p, uint32_t v, int n) {
    char *q = p + n;
    while (v >= 100) {
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * v, 2);
    } else {
        *--q = (char)('0' + v);
    }
}

/* Decimal digits of v at p (no sign); returns the count. */
static inline int write_u64(char *p, uint64_t v) {
    int n = count_digits(v);
    if (n <= 8) {
        write_small(p, (uint32_t)v, n);
    } else if (n <= 16) {
        write_small(p, (uint32_t)(v / 100000000), n - 8);
        write_8(p + n - 8, (uint32_t)(v % 100000000));
    } else {
        uint64_t top = v / 100000000;
        write_small(p, (uint32_t)(top / 100000000), n - 16);
        write_8(p + n - 16, (uint32_t)(top % 100000000));
        write_8(p + n - 8, (uint32_t)(v % 100000000));
    }
    return n;
}

static inline int write_i64(char *p, int64_t v) {
    if (v >= 0 && v < 100000000) {
        int n = count_digits((uint64_t)v);
        write_small(p, (uint32_t)v, n);
        return n;
    }
    if (v < 0) {
        *p = '-';
        return 1 + write_u64(p + 1, (uint64_t)0 - (uint64_t)v);
    }
    return write_u64(p, (uint64_t)v);
}

/* digits (n of them, no trailing zeros) times 10^(point - n): orjson's decimal layout. */
static int layout_decimal(char *out, const char *digits, int n, int point) {
    char *p = out;
    if (point <= 0) {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -point; i++) *p++ = '0';
        memcpy(p, digits, (size_t)n);
        p += n;
    } else if (point >= n) {
        memcpy(p, digits, (size_t)n);
        p += n;
        for (int i = 0; i < point - n; i++) *p++ = '0';
        *p++ = '.';
        *p++ = '0';
    } else {
        memcpy(p, digits, (size_t)point);
        p += point;
        *p++ = '.';
        memcpy(p, digits + point, (size_t)(n - point));
        p += n - point;
    }
    return (int)(p - out);
}

/* Any finite double through Python's repr digits (dtoa), re-laid out as orjson writes:
 * exponents without leading zeros (1e-7, 1e+16) and plain decimals from 1e-5 up. Returns
 * the length, or -1 with a Python error set. */
static int format_double_slow(char *out, double x) {
    /* Writer threads run without the GIL; dtoa's allocations need it. */
    PyGILState_STATE gil = PyGILState_Ensure();
    char *s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) {
        PyErr_Clear(); /* only MemoryError: the caller raises it where it can */
        PyGILState_Release(gil);
        return -1;
    }
    char *p = out;
    const char *q = s;
    if (*q == '-') *p++ = *q++;
    const char *e = strchr(q, 'e');
    if (e == NULL) {
        size_t len = strlen(q);
        memcpy(p, q, len);
        p += len;
    } else {
        char digits[24];
        int n = 0;
        for (const char *c = q; c < e && n < 20; c++)
            if (*c != '.') digits[n++] = *c;
        int exp = atoi(e + 1);
        if (exp == -5) {
            p += layout_decimal(p, digits, n, exp + 1);
        } else {
            size_t len = (size_t)(e - q);
            memcpy(p, q, len);
            p += len;
            *p++ = 'e';
            *p++ = exp < 0 ? '-' : '+';
            p += write_u64(p, (uint64_t)(exp < 0 ? -exp : exp));
        }
    }
    PyMem_Free(s);
    PyGILState_Release(gil);
    return (int)(p - out);
}

/* floor(B * 5^p / 2^s) and whether the division is exact; s in [1, 127]. */
static inline u128 scaled(uint64_t b, int p, int s, int *exact) {
    u128 v = (u128)b * POW5[p];
    *exact = (v & ((((u128)1) << s) - 1)) == 0;
    return v >> s;
}

/* The shortest decimal that reads back as x (x > 0, normal), the closest to x among the
 * shortest (Python repr's digits), computed exactly in 128-bit integers: the rounding
 * interval of x is scaled by 10^p to about 17 integer digits, and the most trailing digits
 * are dropped that still leave a multiple inside it. Returns the length, or 0 when x is
 * outside what this handles (the caller then asks dtoa). */
static int format_shortest(char *out, double x) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    int biased = (int)((bits >> 52) & 0x7ff);
    if (biased == 0 || biased == 0x7ff) return 0;
    uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    int e = biased - 1075; /* x = m * 2^e */
    int e2 = biased - 1023;
    int e10 = (e2 * 78913) >> 18; /* floor(e2 * log10(2)); >> is arithmetic in gcc/clang */
    int p = 16 - e10; /* x * 10^p in [10^16, 10^18) */
    int s = 2 - e - p; /* the quarter-ulp scale: value = B * 5^p / 2^s */
    if (p < 0 || p > MAX_POW5 || s < 2 || s > 127) return 0;
    /* Below a power of two the gap to the lower neighbour is half as wide: leave it. */
    if (m == (1ULL << 52)) return 0;
    u128 mask = (((u128)1) << s) - 1;
    u128 full = (u128)(4 * m) * POW5[p];
    u128 uf = full + (u128)2 * POW5[p], lf = full - (u128)2 * POW5[p];
    /* A bound that is exactly an integer would need the reader's tie rule: not here. */
    if ((uf & mask) == 0 || (lf & mask) == 0 || (uf >> s) >= ((u128)1 << 63)) return 0;
    uint64_t lq = (uint64_t)(lf >> s) + 1, hq = (uint64_t)(uf >> s); /* integers in (l, u) */
    if (lq > hq) return 0;
    uint64_t vq = (uint64_t)(full >> s);
    u128 frac = full & mask;
    /* Drop trailing digits while a multiple of the next power of ten stays inside (l, u);
     * nested floors and ceilings of /10 are those of /10^k. Track how v rounds. */
    int k = 0, last = 0, sticky = frac != 0;
    while (hq / 10 >= (lq + 9) / 10) {
        hq /= 10;
        lq = (lq + 9) / 10;
        if (k) sticky |= last != 0;
        last = (int)(vq % 10);
        vq /= 10;
        k++;
    }
    uint64_t c = vq;
    if (k == 0) {
        u128 half = ((u128)1) << (s - 1);
        if (frac == half) return 0; /* a tie: leave it to dtoa */
        c += frac > half;
    } else {
        if (last == 5 && !sticky) return 0;
        c += last > 5 || (last == 5 && sticky);
    }
    /* the interval is symmetric: the nearest multiple is inside if any is */
    if (c < lq) c = lq;
    if (c > hq) c = hq;
    char digits[24];
    int n = write_u64(digits, c);
    int point = n + k - p;
    /* orjson writes plain decimals for 1e-5 <= x < 1e16, exponents outside */
    if (point < -4 || point > 16) return 0;
    return layout_decimal(out, digits, n, point);
}

/* Format a finite double as orjson does; -1 on a non-finite value, -2 when out of memory
 * (no Python error set either way; callable without the GIL). */
static int format_double(char *out, double x) {
    if (!isfinite(x)) return -1;
    char *p = out;
    double a = x;
    if (signbit(x)) {
        *p++ = '-';
        a = -x;
    }
    if (a == 0.0) {
        memcpy(p, "0.0", 3);
        return (int)(p - out) + 3;
    }
    /* Most engines' times are whole microseconds: ms with three decimals. A decimal of at
     * most 15 significant digits that reads back as x is the only one that does, so it is
     * also repr's shortest. */
    if (a >= 1e-3 && a < 1e12) {
        uint64_t ki = (uint64_t)(a * 1000.0 + 0.5);
        if ((double)ki / 1000.0 == a) {
            char digits[24];
            int n = write_u64(digits, ki);
            int dropped = 0;
            while (dropped < 3 && digits[n - 1] == '0') {
                n--;
                dropped++;
            }
            return (int)(p - out) + layout_decimal(p, digits, n, n + dropped - 3);
        }
    }
    int len = format_shortest(p, a);
    if (len > 0) return (int)(p - out) + len;
    len = format_double_slow(out, x);
    return len < 0 ? -2 : len;
}

/* ---- an output buffer: a bytes object grown in place -------------------------------- */

typedef struct {
    PyObject *bytes;
    char *p;
    Py_ssize_t len, cap;
} Out;

static int out_init(Out *o, Py_ssize_t cap) {
    if (cap < 64) cap = 64;
    o->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (o->bytes == NULL) return -1;
    o->p = PyBytes_AS_STRING(o->bytes);
    o->len = 0;
    o->cap = cap;
    return 0;
}

static int out_reserve(Out *o, Py_ssize_t more) {
    if (o->cap - o->len >= more) return 0;
    Py_ssize_t cap = o->cap + o->cap / 2 + more;
    if (_PyBytes_Resize(&o->bytes, cap) < 0) return -1;
    o->p = PyBytes_AS_STRING(o->bytes);
    o->cap = cap;
    return 0;
}

static int out_put(Out *o, const char *s, Py_ssize_t n) {
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->p + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static PyObject *out_finish(Out *o) {
    if (_PyBytes_Resize(&o->bytes, o->len) < 0) return NULL;
    return o->bytes;
}

static void out_drop(Out *o) { Py_CLEAR(o->bytes); }

#define PUT_LIT(o, s) memcpy((o)->p + (o)->len, s, sizeof(s) - 1), (o)->len += sizeof(s) - 1

/* A contiguous column of `itemsize` bytes per item, or NULL-buffer for None. */
static int get_column(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-d column of %zd-byte items", what,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ValueError((field, index)) for the Python side to word. */
static PyObject *bad_value(const char *field, Py_ssize_t i) {
    PyObject *arg = Py_BuildValue("(sn)", field, i);
    if (arg != NULL) {
        PyErr_SetObject(PyExc_ValueError, arg);
        Py_DECREF(arg);
    }
    return NULL;
}

/* One writer thread's share of the samples: [lo, hi) written into buf, which was sized for
 * the longest possible text, so no thread ever grows a buffer. */
typedef struct {
    const double *t;
    const int32_t *s;
    const int8_t *mk;
    const char *const *names;
    const Py_ssize_t *name_len;
    Py_ssize_t n_names, lo, hi;
    char *buf;
    Py_ssize_t len;
    Py_ssize_t bad;   /* index of the first refused value, or -1 */
    int bad_kind;     /* 0 timestamp, 1 marker, 2 out of memory */
} Share;

#define PUT(p, lit) (memcpy((p), lit, sizeof(lit) - 1), (p) += sizeof(lit) - 1)

static void *write_share(void *arg) {
    Share *w = arg;
    char *p = w->buf;
    for (Py_ssize_t i = w->lo; i < w->hi; i++) {
        PUT(p, "{\"timestamp\":");
        int len = format_double(p, w->t[i]);
        if (len < 0) {
            w->bad = i;
            w->bad_kind = len == -1 ? 0 : 2;
            break;
        }
        p += len;
        if (w->s[i] != -1) {
            PUT(p, ",\"stackId\":");
            p += write_i64(p, w->s[i]);
        }
        if (w->mk != NULL && w->mk[i] != -1) {
            int8_t code = w->mk[i];
            if (code < 0 || code >= w->n_names) {
                w->bad = i;
                w->bad_kind = 1;
                break;
            }
            PUT(p, ",\"marker\":");
            memcpy(p, w->names[code], (size_t)w->name_len[code]);
            p += w->name_len[code];
        }
        PUT(p, "},");
    }
    w->len = p - w->buf;
    return NULL;
}

#define MAX_THREADS 8
/* Below this many samples one thread writes them all (a thread costs ~50 us to start). */
#define SAMPLES_PER_THREAD 100000

/* The sample columns both writers take, checked, with the markers' names; the longest
 * text one sample can take: {"timestamp":<at most 25>,"stackId":<at most 11>,"marker":<name>}, */
typedef struct {
    Py_buffer tv, sv, mv;
    int have_t, have_s, have_m;
    Py_ssize_t n, n_names, most;
    const char *name_p[128];
    Py_ssize_t name_len[128];
} SampleCols;

/* 0, or -1 with an exception set; sample_cols_close(c) is due either way. */
static int sample_cols_open(SampleCols *c, PyObject *times, PyObject *stacks,
                            PyObject *markers, PyObject *names) {
    memset(c, 0, sizeof(*c));
    if (get_column(times, &c->tv, 8, "times") < 0) return -1;
    c->have_t = 1;
    if (get_column(stacks, &c->sv, 4, "stacks") < 0) return -1;
    c->have_s = 1;
    if (markers != Py_None) {
        if (get_column(markers, &c->mv, 1, "markers") < 0) return -1;
        c->have_m = 1;
    }
    c->n = c->tv.shape[0];
    if (c->sv.shape[0] != c->n || (c->have_m && c->mv.shape[0] != c->n)) {
        PyErr_SetString(PyExc_ValueError, "columns differ in length");
        return -1;
    }
    c->n_names = PyTuple_GET_SIZE(names);
    Py_ssize_t name_max = 0;
    if (c->n_names > 127) {
        PyErr_SetString(PyExc_ValueError, "too many marker names");
        return -1;
    }
    for (Py_ssize_t j = 0; j < c->n_names; j++) {
        PyObject *nm = PyTuple_GET_ITEM(names, j);
        if (!PyBytes_Check(nm) || PyBytes_GET_SIZE(nm) > 64) {
            PyErr_SetString(PyExc_TypeError, "marker names must be short bytes");
            return -1;
        }
        c->name_p[j] = PyBytes_AS_STRING(nm);
        c->name_len[j] = PyBytes_GET_SIZE(nm);
        if (c->name_len[j] > name_max) name_max = c->name_len[j];
    }
    c->most = 13 + 25 + 11 + 11 + 10 + name_max + 2;
    return 0;
}

static void sample_cols_close(SampleCols *c) {
    if (c->have_t) PyBuffer_Release(&c->tv);
    if (c->have_s) PyBuffer_Release(&c->sv);
    if (c->have_m) PyBuffer_Release(&c->mv);
}

/* write_samples(head, times f8, stacks i4, markers i1 | None, names, tail, threads) ->
 * bytes: head + [{"timestamp":t,"stackId":s,"marker":name}, ...] + tail, stackId and
 * marker left out where the column holds -1. names: the markers' JSON strings (bytes), by
 * code. Up to `threads` threads write consecutive shares without the GIL; the first share
 * goes straight into the result, the others are copied after it. */
static PyObject *write_samples(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer head, tail;
    PyObject *times, *stacks, *markers, *names;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "y*OOOO!y*|i", &head, &times, &stacks, &markers, &PyTuple_Type,
                          &names, &tail, &threads))
        return NULL;
    PyObject *result = NULL;
    Share share[MAX_THREADS];
    memset(share, 0, sizeof(share));
    SampleCols c;
    if (sample_cols_open(&c, times, stacks, markers, names) < 0) goto done;
    Py_ssize_t n = c.n, most = c.most;
    if (n > (PY_SSIZE_T_MAX - head.len - tail.len - 2) / most) {
        PyErr_NoMemory();
        goto done;
    }
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (n / SAMPLES_PER_THREAD < threads) threads = (int)(n / SAMPLES_PER_THREAD);
    if (threads < 1) threads = 1;
    Py_ssize_t per = n / threads;
    /* Sized for the longest text: pages past what is written are never touched. */
    result = PyBytes_FromStringAndSize(NULL, head.len + 1 + n * most + tail.len + 2);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    memcpy(out, head.buf, (size_t)head.len);
    out[head.len] = '[';
    for (int k = 0; k < threads; k++) {
        Share *w = &share[k];
        w->t = c.tv.buf;
        w->s = c.sv.buf;
        w->mk = c.have_m ? c.mv.buf : NULL;
        w->names = c.name_p;
        w->name_len = c.name_len;
        w->n_names = c.n_names;
        w->lo = k * per;
        w->hi = k == threads - 1 ? n : (k + 1) * per;
        w->bad = -1;
        if (k == 0) {
            w->buf = out + head.len + 1;
        } else {
            w->buf = PyMem_RawMalloc((size_t)((w->hi - w->lo) * most + 1));
            if (w->buf == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
        }
    }
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    Py_BEGIN_ALLOW_THREADS;
    for (int k = 1; k < threads; k++)
        started[k] = pthread_create(&tid[k], NULL, write_share, &share[k]) == 0;
    write_share(&share[0]);
    for (int k = 1; k < threads; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            write_share(&share[k]); /* no thread to be had: write it here */
    }
    Py_END_ALLOW_THREADS;
    for (int k = 0; k < threads; k++) {
        if (share[k].bad < 0) continue;
        if (share[k].bad_kind == 2)
            PyErr_NoMemory();
        else
            bad_value(share[k].bad_kind == 0 ? "timestamp" : "marker", share[k].bad);
        goto fail;
    }
    char *p = share[0].buf + share[0].len;
    for (int k = 1; k < threads; k++) {
        memcpy(p, share[k].buf, (size_t)share[k].len);
        p += share[k].len;
    }
    if (n) p--; /* the last comma */
    *p++ = ']';
    memcpy(p, tail.buf, (size_t)tail.len);
    p += tail.len;
    if (_PyBytes_Resize(&result, p - out) < 0) result = NULL;
    goto done;
fail:
    Py_CLEAR(result);
done:
    for (int k = 1; k < MAX_THREADS; k++) PyMem_RawFree(share[k].buf);
    sample_cols_close(&c);
    PyBuffer_Release(&head);
    PyBuffer_Release(&tail);
    return result;
}

/* ---- streaming the samples to a file ------------------------------------------------- */

/* Threads take chunks of samples round-robin, each writes its chunk's text into its own
 * small buffer and then, in chunk order, to the file: formatting overlaps writing, and no
 * buffer the size of the output is ever made. */
typedef struct {
    const double *t;
    const int32_t *s;
    const int8_t *mk;
    const char *const *names;
    const Py_ssize_t *name_len;
    Py_ssize_t n_names, n, chunk, n_chunks, most;
    int fd, threads;
    pthread_mutex_t mu;
    pthread_cond_t turn;
    Py_ssize_t next;      /* the chunk whose turn it is to be written */
    Py_ssize_t bad_chunk; /* the first chunk that failed, or n_chunks */
    Py_ssize_t bad;       /* its first refused sample */
    int bad_kind;         /* 0 timestamp, 1 marker, 2 out of memory, 3 write error */
    int err_no;
} Stream;

typedef struct {
    Stream *st;
    int id;
    char *buf;
} Writer;

static int write_all(int fd, const char *p, Py_ssize_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, (size_t)(len > (1 << 30) ? (1 << 30) : len));
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= w;
    }
    return 0;
}

/* Record a failure in chunk k unless an earlier chunk failed already; wakes everyone. */
static void stream_fail(Stream *st, Py_ssize_t k, Py_ssize_t index, int kind, int err_no) {
    if (k < st->bad_chunk) {
        st->bad_chunk = k;
        st->bad = index;
        st->bad_kind = kind;
        st->err_no = err_no;
    }
    pthread_cond_broadcast(&st->turn);
}

static void *stream_worker(void *arg) {
    Writer *w = arg;
    Stream *st = w->st;
    for (Py_ssize_t k = w->id; k < st->n_chunks; k += st->threads) {
        pthread_mutex_lock(&st->mu);
        /* chunks before a failed one still run: the first refused sample is the one named */
        int stop = k > st->bad_chunk;
        pthread_mutex_unlock(&st->mu);
        if (stop) break;
        Share sh = {0};
        sh.t = st->t;
        sh.s = st->s;
        sh.mk = st->mk;
        sh.names = st->names;
        sh.name_len = st->name_len;
        sh.n_names = st->n_names;
        sh.lo = k * st->chunk;
        sh.hi = sh.lo + st->chunk < st->n ? sh.lo + st->chunk : st->n;
        sh.buf = w->buf;
        sh.bad = -1;
        write_share(&sh);
        Py_ssize_t len = sh.len;
        if (k == st->n_chunks - 1 && len > 0) len--; /* the last comma */
        pthread_mutex_lock(&st->mu);
        if (sh.bad >= 0) {
            stream_fail(st, k, sh.bad, sh.bad_kind, 0);
            pthread_mutex_unlock(&st->mu);
            break;
        }
        while (st->next != k && st->bad_chunk > k) pthread_cond_wait(&st->turn, &st->mu);
        int go = st->bad_chunk > k;
        pthread_mutex_unlock(&st->mu);
        if (!go) break;
        /* our turn: nobody else writes until `next` moves on */
        int failed = write_all(st->fd, w->buf, len) < 0;
        int err_no = errno;
        pthread_mutex_lock(&st->mu);
        if (failed)
            stream_fail(st, k, -1, 3, err_no);
        st->next = k + 1;
        pthread_cond_broadcast(&st->turn);
        pthread_mutex_unlock(&st->mu);
        if (failed) break;
    }
    return NULL;
}

#define STREAM_CHUNK 65536

/* write_samples_to(fd, times f8, stacks i4, markers i1 | None, names, threads) -> None:
 * the samples array's elements (what write_samples puts between `[` and `]`) written to
 * the file descriptor `fd` at its offset. ValueError(field, index) as write_samples;
 * OSError when writing fails. */
static PyObject *write_samples_to(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *times, *stacks, *markers, *names;
    int fd, threads = 1;
    if (!PyArg_ParseTuple(args, "iOOOO!|i", &fd, &times, &stacks, &markers, &PyTuple_Type,
                          &names, &threads))
        return NULL;
    PyObject *result = NULL;
    Writer wr[MAX_THREADS];
    memset(wr, 0, sizeof(wr));
    SampleCols c;
    if (sample_cols_open(&c, times, stacks, markers, names) < 0) goto done;
    Stream st;
    memset(&st, 0, sizeof(st));
    st.t = c.tv.buf;
    st.s = c.sv.buf;
    st.mk = c.have_m ? c.mv.buf : NULL;
    st.names = c.name_p;
    st.name_len = c.name_len;
    st.n_names = c.n_names;
    st.n = c.n;
    st.chunk = STREAM_CHUNK;
    st.n_chunks = (c.n + STREAM_CHUNK - 1) / STREAM_CHUNK;
    st.most = c.most;
    st.fd = fd;
    st.bad_chunk = st.n_chunks;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > st.n_chunks) threads = st.n_chunks > 0 ? (int)st.n_chunks : 1;
    for (int k = 0; k < threads; k++) {
        wr[k].st = &st;
        wr[k].id = k;
        wr[k].buf = PyMem_RawMalloc((size_t)(STREAM_CHUNK * st.most));
        if (wr[k].buf == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.turn, NULL);
    pthread_t tid[MAX_THREADS];
    int started = 1;
    Py_BEGIN_ALLOW_THREADS;
    st.threads = threads;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, stream_worker, &wr[started]) != 0) break;
    if (started < threads) {
        /* Fewer threads than planned: nothing is written before chunk 0 (ours), so stop
         * the ones started and write everything here. */
        pthread_mutex_lock(&st.mu);
        st.bad_chunk = -1;
        pthread_cond_broadcast(&st.turn);
        pthread_mutex_unlock(&st.mu);
        for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
        st.bad_chunk = st.n_chunks;
        st.next = 0;
        st.threads = 1;
        started = 1;
    }
    stream_worker(&wr[0]);
    for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
    Py_END_ALLOW_THREADS;
    pthread_cond_destroy(&st.turn);
    pthread_mutex_destroy(&st.mu);
    if (st.bad_chunk < st.n_chunks) {
        if (st.bad_kind == 3) {
            errno = st.err_no;
            PyErr_SetFromErrno(PyExc_OSError);
        } else if (st.bad_kind == 2) {
            PyErr_NoMemory();
        } else {
            bad_value(st.bad_kind == 0 ? "timestamp" : "marker", st.bad);
        }
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < MAX_THREADS; k++) PyMem_RawFree(wr[k].buf);
    sample_cols_close(&c);
    return result;
}

/* write_stacks(parents i4, frames i4) -> bytes: [{"parentId":p,"frameId":f}, ...], the
 * parentId left out where it is -1. */
static PyObject *write_stacks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parents, *frames;
    if (!PyArg_ParseTuple(args, "OO", &parents, &frames)) return NULL;
    Py_buffer pv, fv;
    if (get_column(parents, &pv, 4, "parents") < 0) return NULL;
    if (get_column(frames, &fv, 4, "frames") < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    PyObject *result = NULL;
    Out o = {0};
    Py_ssize_t n = pv.shape[0];
    const int32_t *pa = pv.buf, *fr = fv.buf;
    if (fv.shape[0] != n) {
        PyErr_SetString(PyExc_ValueError, "columns differ in length");
        goto done;
    }
    if (out_init(&o, 2 + n * 36) < 0 || out_put(&o, "[", 1) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (out_reserve(&o, 64) < 0) goto done;
        if (pa[i] != -1) {
            PUT_LIT(&o, "{\"parentId\":");
            o.len += write_i64(o.p + o.len, pa[i]);
            PUT_LIT(&o, ",\"frameId\":");
        } else {
            PUT_LIT(&o, "{\"frameId\":");
        }
        o.len += write_i64(o.p + o.len, fr[i]);
        PUT_LIT(&o, "},");
    }
    if (n) o.len--;
    if (out_put(&o, "]", 1) < 0) goto done;
    result = out_finish(&o);
    o.bytes = NULL;
done:
    out_drop(&o);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&fv);
    return result;
}

/* write_floats(values f8) -> bytes: [v, ...]; ValueError(("value", i)) on a non-finite. */
static PyObject *write_floats(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer v;
    if (get_column(arg, &v, 8, "values") < 0) return NULL;
    PyObject *result = NULL;
    Out o = {0};
    Py_ssize_t n = v.shape[0];
    const double *x = v.buf;
    if (out_init(&o, 2 + n * 20) < 0 || out_put(&o, "[", 1) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (out_reserve(&o, 40) < 0) goto done;
        int len = format_double(o.p + o.len, x[i]);
        if (len == -1) {
            bad_value("value", i);
            goto done;
        }
        if (len < 0) {
            PyErr_NoMemory();
            goto done;
        }
        o.len += len;
        o.p[o.len++] = ',';
    }
    if (n) o.len--;
    if (out_put(&o, "]", 1) < 0) goto done;
    result = out_finish(&o);
    o.bytes = NULL;
done:
    out_drop(&o);
    PyBuffer_Release(&v);
    return result;
}

/* ---- reading numbers ------------------------------------------------------------------ */

static inline int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static inline const char *skip_ws(const char *p, const char *end) {
    while (p < end && is_ws(*p)) p++;
    return p;
}

/* Does w / 10^q (w < 2^64, 0 < q <= 27) read as the positive normal double y? */
static int rounds_to(uint64_t w, int q, double y) {
    uint64_t bits;
    memcpy(&bits, &y, 8);
    int biased = (int)((bits >> 52) & 0x7ff);
    if (biased == 0 || biased == 0x7ff) return 0;
    uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
    int e = biased - 1075;
    int s = 2 - e - q;
    if (s < 1 || s > 127) return -1;
    int lx, ux;
    u128 u = scaled(4 * m + 2, q, s, &ux);
    u128 l = scaled(m == (1ULL << 52) && biased > 1 ? 4 * m - 1 : 4 * m - 2, q, s, &lx);
    int even = (m & 1) == 0;
    /* w > l: w > floor(l), or w == l exactly (a tie, won by the even significand) */
    int above = w > l || (w == l && lx && even);
    int below = w < u || (w == u && ux && even);
    return above && below;
}

static double next_up(double y) { return nextafter(y, INFINITY); }
static double next_down(double y) { return nextafter(y, 0.0); }

/* Parse one JSON number at [p, end). Returns the end of its text or NULL when the text is
 * not a JSON number or the value is not representable (the caller falls back). *is_int
 * tells a number written without fraction and exponent; *ival holds it then (in int64). */
static const char *parse_number(const char *p, const char *end, double *out, int *is_int,
                                int64_t *ival) {
    const char *start = p;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) return NULL;
    uint64_t w = 0;
    int ndigits = 0; /* significant digits taken into w */
    int dropped = 0; /* digits beyond 19 (the value is then left to dtoa) */
    int q = 0;       /* digits after the point */
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) return NULL; /* no leading zeros in JSON */
    } else {
        while (p < end && is_digit(*p)) {
            if (ndigits < 19) {
                w = w * 10 + (uint64_t)(*p - '0');
                ndigits++;
            } else {
                dropped++;
            }
            p++;
        }
    }
    int frac = 0, expo = 0;
    if (p < end && *p == '.') {
        frac = 1;
        p++;
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) {
            if (ndigits < 19 && !dropped) {
                if (w || *p != '0') ndigits += 1;
                w = w * 10 + (uint64_t)(*p - '0');
                q++;
            } else {
                dropped++;
            }
            p++;
        }
    }
    int e = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        expo = 1;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) {
            if (e < 100000) e = e * 10 + (*p - '0');
            p++;
        }
        if (eneg) e = -e;
    }
    /* the number must end here: no delimiter within bounds means a truncated text */
    if (p >= end) return NULL;
    *is_int = !frac && !expo;
    if (*is_int) {
        if (dropped || w > (uint64_t)INT64_MAX + (uint64_t)neg) return NULL;
        *ival = neg ? (int64_t)((uint64_t)0 - w) : (int64_t)w;
        *out = (double)*ival;
        return p;
    }
    if (!dropped && w == 0) {
        *out = neg ? -0.0 : 0.0;
        return p;
    }
    int q10 = q - e; /* value = w / 10^q10 */
    double y;
    if (!dropped && w < (1ULL << 53) && q10 >= -22 && q10 <= 22) {
        /* Clinger's fast path: both operands exact, one rounding */
        y = q10 >= 0 ? (double)w / POW10[q10] : (double)w * POW10[-q10];
    } else if (!dropped && q10 > 0 && q10 <= 22) {
        /* within an ulp or so of the answer: check the neighbours exactly */
        y = (double)w / POW10[q10];
        int ok = rounds_to(w, q10, y);
        if (ok != 1) {
            double d = next_down(y), u = next_up(y);
            if (rounds_to(w, q10, d) == 1)
                y = d;
            else if (rounds_to(w, q10, u) == 1)
                y = u;
            else
                y = NAN; /* leave it to dtoa below */
        }
        if (isnan(y)) goto slow;
    } else {
        goto slow;
    }
    *out = neg ? -y : y;
    return p;
slow:;
    /* dtoa's correctly rounded parse of the validated text; the character after it is a
     * delimiter inside the buffer, so the prefix parse stops where the grammar did. */
    char *stop = NULL;
    double v = PyOS_string_to_double(start, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (stop != p) return NULL;
    *out = v;
    return p;
}

/* A growable column: a bytearray filled in place. */
typedef struct {
    PyObject *arr;
    char *p;
    Py_ssize_t n, cap, item;
} Col;

static int col_init(Col *c, Py_ssize_t cap, Py_ssize_t item) {
    if (cap < 16) cap = 16;
    c->arr = PyByteArray_FromStringAndSize(NULL, cap * item);
    if (c->arr == NULL) return -1;
    c->p = PyByteArray_AS_STRING(c->arr);
    c->n = 0;
    c->cap = cap;
    c->item = item;
    return 0;
}

static int col_grow(Col *c) {
    Py_ssize_t cap = c->cap + c->cap / 2 + 16;
    if (PyByteArray_Resize(c->arr, cap * c->item) < 0) return -1;
    c->p = PyByteArray_AS_STRING(c->arr);
    c->cap = cap;
    return 0;
}

static int col_finish(Col *c) { return PyByteArray_Resize(c->arr, c->n * c->item); }

#define KEY_IS(p, len, lit) ((len) == sizeof(lit) - 1 && memcmp((p), lit, sizeof(lit) - 1) == 0)

/* read_samples(buf, start, n_stacks, names) -> (times, stacks, markers | None, end) | None
 *
 * The objects of a samples array whose first byte after `[` is at `start`: timestamp (a
 * finite number, required), stackId (an integer in [0, n_stacks), optional) and marker (one
 * of `names`, the spec's marker strings as bytes, or null; optional). times is a bytearray
 * of float64, stacks of int32 (-1 where absent), markers of int8 (-1 where absent or null;
 * None when no sample has one); end is the offset of the closing `]`. None for anything
 * else: other keys, escapes in keys, repeated keys, wrong types, out-of-range values,
 * malformed or truncated text. */
static PyObject *read_samples(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b;
    Py_ssize_t start, n_stacks;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*nnO!", &b, &start, &n_stacks, &PyTuple_Type, &names))
        return NULL;
    PyObject *result = NULL;
    Col t = {0}, s = {0}, mk = {0};
    int any_marker = 0;
    const char *base = b.buf;
    const char *end = base + b.len;
    Py_ssize_t n_names = PyTuple_GET_SIZE(names);
    for (Py_ssize_t j = 0; j < n_names; j++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, j))) {
            PyErr_SetString(PyExc_TypeError, "marker names must be bytes");
            goto fail;
        }
    }
    if (start < 0 || start > b.len) goto fallback;
    /* a guess at the count from the size (a sample with a stack takes ~30-40 bytes) */
    Py_ssize_t guess = (b.len - start) / 32 + 16;
    if (col_init(&t, guess, 8) < 0 || col_init(&s, guess, 4) < 0 || col_init(&mk, guess, 1) < 0)
        goto fail;
    const char *p = skip_ws(base + start, end);
    if (p < end && *p == ']') goto finished;
    for (;;) {
        if (p >= end || *p != '{') goto fallback;
        p = skip_ws(p + 1, end);
        if (t.n == t.cap) {
            if (t.n >= MAX_ENTRIES) goto fallback;
            if (col_grow(&t) < 0 || col_grow(&s) < 0 || col_grow(&mk) < 0) goto fail;
        }
        double ts = 0.0;
        int32_t sid = -1;
        int8_t code = -1;
        int seen = 0; /* 1 timestamp, 2 stackId, 4 marker */
        if (p < end && *p == '}') goto fallback; /* no timestamp */
        for (;;) {
            if (p >= end || *p != '"') goto fallback;
            const char *k = ++p;
            while (p < end && *p != '"' && *p != '\\') p++;
            if (p >= end || *p != '"') goto fallback; /* escapes: the validating path */
            Py_ssize_t klen = p - k;
            p = skip_ws(p + 1, end);
            if (p >= end || *p != ':') goto fallback;
            p = skip_ws(p + 1, end);
            if (KEY_IS(k, klen, "timestamp")) {
                if (seen & 1) goto fallback;
                seen |= 1;
                int is_int;
                int64_t iv;
                p = parse_number(p, end, &ts, &is_int, &iv);
                if (p == NULL || !isfinite(ts)) goto fallback;
            } else if (KEY_IS(k, klen, "stackId")) {
                if (seen & 2) goto fallback;
                seen |= 2;
                int is_int;
                int64_t iv;
                double dv;
                p = parse_number(p, end, &dv, &is_int, &iv);
                if (p == NULL || !is_int || iv < 0 || iv >= n_stacks) goto fallback;
                sid = (int32_t)iv;
            } else if (KEY_IS(k, klen, "marker")) {
                if (seen & 4) goto fallback;
                seen |= 4;
                if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
                    p += 4;
                } else {
                    Py_ssize_t j;
                    for (j = 0; j < n_names; j++) {
                        PyObject *nm = PyTuple_GET_ITEM(names, j);
                        Py_ssize_t len = PyBytes_GET_SIZE(nm);
                        if (end - p >= len && memcmp(p, PyBytes_AS_STRING(nm), (size_t)len) == 0)
                            break;
                    }
                    if (j == n_names) goto fallback;
                    p += PyBytes_GET_SIZE(PyTuple_GET_ITEM(names, j));
                    code = (int8_t)j;
                    any_marker = 1;
                }
            } else {
                goto fallback;
            }
            p = skip_ws(p, end);
            if (p >= end) goto fallback;
            if (*p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (*p == '}') break;
            goto fallback;
        }
        if (!(seen & 1)) goto fallback;
        ((double *)t.p)[t.n++] = ts;
        ((int32_t *)s.p)[s.n++] = sid;
        ((int8_t *)mk.p)[mk.n++] = code;
        p = skip_ws(p + 1, end);
        if (p >= end) goto fallback;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == ']') break;
        goto fallback;
    }
finished:
    if (col_finish(&t) < 0 || col_finish(&s) < 0 || col_finish(&mk) < 0) goto fail;
    result = Py_BuildValue("(OOOn)", t.arr, s.arr, any_marker ? mk.arr : Py_None,
                           (Py_ssize_t)(p - base));
    goto fail; /* releases our references; result holds its own */
fallback:
    result = Py_None;
    Py_INCREF(result);
fail:
    Py_XDECREF(t.arr);
    Py_XDECREF(s.arr);
    Py_XDECREF(mk.arr);
    PyBuffer_Release(&b);
    return result;
}

/* read_ints(buf, start) -> (int64 bytearray, end) | None: a JSON array of integers (each
 * within int64) whose first byte after `[` is at `start`; end is the offset of its `]`. */
static PyObject *read_ints(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*n", &b, &start)) return NULL;
    PyObject *result = NULL;
    Col c = {0};
    const char *base = b.buf;
    const char *end = base + b.len;
    if (start < 0 || start > b.len) goto fallback;
    if (col_init(&c, (b.len - start) / 4 + 16, 8) < 0) goto fail;
    const char *p = skip_ws(base + start, end);
    if (p < end && *p == ']') goto finished;
    for (;;) {
        if (c.n == c.cap) {
            if (c.n >= MAX_ENTRIES) goto fallback;
            if (col_grow(&c) < 0) goto fail;
        }
        /* the common case inline: a short run of digits */
        int neg = 0;
        const char *q = p;
        if (q < end && *q == '-') {
            neg = 1;
            q++;
        }
        if (q >= end || !is_digit(*q)) goto fallback;
        uint64_t w = 0;
        const char *digits = q;
        if (*q == '0') {
            q++;
        } else {
            while (q < end && is_digit(*q) && q - digits < 19) w = w * 10 + (uint64_t)(*q++ - '0');
        }
        if (q >= end || is_digit(*q) || *q == '.' || *q == 'e' || *q == 'E') goto fallback;
        if (w > (uint64_t)INT64_MAX + (uint64_t)neg) goto fallback;
        ((int64_t *)c.p)[c.n++] = neg ? (int64_t)((uint64_t)0 - w) : (int64_t)w;
        p = skip_ws(q, end);
        if (p >= end) goto fallback;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == ']') break;
        goto fallback;
    }
finished:
    if (col_finish(&c) < 0) goto fail;
    result = Py_BuildValue("(On)", c.arr, (Py_ssize_t)(p - base));
    goto fail;
fallback:
    result = Py_None;
    Py_INCREF(result);
fail:
    Py_XDECREF(c.arr);
    PyBuffer_Release(&b);
    return result;
}

/* read_floats(buf, start) -> (float64 bytearray, end) | None: a JSON array of finite
 * numbers whose first byte after `[` is at `start`; end is the offset of its `]`. */
static PyObject *read_floats(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*n", &b, &start)) return NULL;
    PyObject *result = NULL;
    Col c = {0};
    const char *base = b.buf;
    const char *end = base + b.len;
    if (start < 0 || start > b.len) goto fallback;
    if (col_init(&c, (b.len - start) / 8 + 16, 8) < 0) goto fail;
    const char *p = skip_ws(base + start, end);
    if (p < end && *p == ']') goto finished;
    for (;;) {
        if (c.n == c.cap) {
            if (c.n >= MAX_ENTRIES) goto fallback;
            if (col_grow(&c) < 0) goto fail;
        }
        double v;
        int is_int;
        int64_t iv;
        p = parse_number(p, end, &v, &is_int, &iv);
        if (p == NULL || !isfinite(v)) goto fallback;
        ((double *)c.p)[c.n++] = v;
        p = skip_ws(p, end);
        if (p >= end) goto fallback;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == ']') break;
        goto fallback;
    }
finished:
    if (col_finish(&c) < 0) goto fail;
    result = Py_BuildValue("(On)", c.arr, (Py_ssize_t)(p - base));
    goto fail;
fallback:
    result = Py_None;
    Py_INCREF(result);
fail:
    Py_XDECREF(c.arr);
    PyBuffer_Release(&b);
    return result;
}

/* ---- V8's CDP profile (Profiler.Profile) as the inspector sends it --------------------- */

/* A JSON string at p (its opening quote) without escapes or control characters: *s, *n
 * its bytes. Returns the end of its text, or NULL; *escaped set when it has escapes
 * (then escaped_string reads it). */
static const char *plain_string(const char *p, const char *end, const char **s, Py_ssize_t *n,
                                int *escaped) {
    *escaped = 0;
    if (p >= end || *p != '"') return NULL;
    const char *q = ++p;
    const char *hit = memchr(q, '"', (size_t)(end - q));
    if (hit == NULL) return NULL;
    for (const char *r = q; r < hit; r++) {
        unsigned char c = (unsigned char)*r;
        if (c == '\\') {
            *escaped = 1;
            return NULL;
        }
        if (c < 0x20) return NULL;
    }
    *s = p;
    *n = hit - p;
    return hit + 1;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A JSON string with escapes at p (its opening quote), decoded: a new str in *out (NULL
 * with no error for text the fallback should judge: a lone surrogate, bad UTF-8, a bad
 * escape). Returns the end of its text or NULL. */
static const char *escaped_string(const char *p, const char *end, PyObject **out) {
    *out = NULL;
    if (p >= end || *p != '"') return NULL;
    p++;
    const char *close = p;
    while (close < end && *close != '"') close += *close == '\\' ? 2 : 1;
    if (close >= end) return NULL;
    char *buf = PyMem_Malloc((size_t)(close - p) + 1);
    if (buf == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    char *o = buf;
    while (p < close) {
        unsigned char c = (unsigned char)*p++;
        if (c < 0x20) goto bad;
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        char e = *p++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u, lo;
            if (close - p < 4 || hex4(p, &u) < 0) goto bad;
            p += 4;
            if (u >= 0xDC00 && u <= 0xDFFF) goto bad; /* a lone low surrogate */
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (close - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    goto bad;
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u < 0x80) {
                *o++ = (char)u;
            } else if (u < 0x800) {
                *o++ = (char)(0xC0 | (u >> 6));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                *o++ = (char)(0xE0 | (u >> 12));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (u >> 18));
                *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default:
            goto bad;
        }
    }
    *out = PyUnicode_DecodeUTF8(buf, o - buf, "strict");
    PyMem_Free(buf);
    if (*out == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return *out == NULL ? NULL : close + 1;
bad:
    PyMem_Free(buf);
    return NULL;
}

/* Past one JSON value of any kind (strings with escapes, nested up to 64 deep). */
static const char *skip_value(const char *p, const char *end, int depth) {
    p = skip_ws(p, end);
    if (p >= end || depth > 64) return NULL;
    char c = *p;
    if (c == '"') {
        p++;
        while (p < end && *p != '"') {
            if ((unsigned char)*p < 0x20) return NULL;
            if (*p++ != '\\') continue;
            if (p >= end) return NULL;
            if (*p == 'u') {
                if (end - p < 5) return NULL;
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i])) return NULL;
                p += 5;
            } else if (strchr("\"\\/bfnrt", *p) != NULL && *p) {
                p++;
            } else {
                return NULL;
            }
        }
        return p < end ? p + 1 : NULL;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p = skip_ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (c == '{') {
                if (p >= end || *p != '"') return NULL;
                p = skip_value(p, end, depth + 1); /* the key */
                if (p == NULL) return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p++;
            }
            p = skip_value(p, end, depth + 1);
            if (p == NULL) return NULL;
            p = skip_ws(p, end);
            if (p >= end) return NULL;
            if (*p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    if (c == 't') return end - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    if (c == 'f') return end - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    if (c == 'n') return end - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    double v;
    int is_int;
    int64_t iv;
    return parse_number(p, end, &v, &is_int, &iv);
}

/* One JSON integer (no fraction, no exponent, within int64). */
static const char *json_int(const char *p, const char *end, int64_t *out) {
    double v;
    int is_int;
    p = parse_number(p, end, &v, &is_int, out);
    return p != NULL && is_int ? p : NULL;
}

/* Strings seen in one profile, by their bytes: a tsc recording's slices name the same few
 * hundred functions and URLs in thousands of nodes. */
typedef struct {
    const char *s;
    Py_ssize_t n;
    uint64_t h;
    PyObject *str;
} Interned;

typedef struct {
    Interned *slots;
    Py_ssize_t cap, used;
} StrTable;

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void table_free(StrTable *t) {
    for (Py_ssize_t i = 0; i < t->cap; i++) Py_XDECREF(t->slots[i].str);
    PyMem_Free(t->slots);
    t->slots = NULL;
}

static int table_grow(StrTable *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 512;
    Interned *slots = PyMem_Calloc((size_t)cap, sizeof(Interned));
    if (slots == NULL) return -1;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        Interned *e = &t->slots[i];
        if (e->str == NULL) continue;
        Py_ssize_t j = (Py_ssize_t)(e->h & (uint64_t)(cap - 1));
        while (slots[j].str != NULL) j = (j + 1) & (cap - 1);
        slots[j] = *e;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* A new reference to the str of s[0:n] (UTF-8), or NULL with no error set when the bytes
 * are not UTF-8 (the fallback words it), or NULL with an error (memory). */
static PyObject *table_str(StrTable *t, const char *s, Py_ssize_t n) {
    if (2 * (t->used + 1) > t->cap && table_grow(t) < 0) return NULL;
    uint64_t h = hash_bytes(s, n);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(t->cap - 1));
    while (t->slots[j].str != NULL) {
        Interned *e = &t->slots[j];
        if (e->h == h && e->n == n && memcmp(e->s, s, (size_t)n) == 0) {
            Py_INCREF(e->str);
            return e->str;
        }
        j = (j + 1) & (t->cap - 1);
    }
    PyObject *str = PyUnicode_DecodeUTF8(s, n, "strict");
    if (str == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return NULL;
    }
    t->slots[j] = (Interned){s, n, h, str};
    t->used++;
    Py_INCREF(str);
    return str;
}

static int col_push(Col *c, int64_t v) {
    if (c->n == c->cap) {
        if (c->n >= MAX_ENTRIES) return -1;
        if (col_grow(c) < 0) return -2;
    }
    ((int64_t *)c->p)[c->n++] = v;
    return 0;
}

/* Push a new reference onto a list (stolen). */
static int list_push(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

/* An array of integers at p (its '['), each pushed onto c. Returns its end or NULL; *oom
 * set when memory ran out. */
static const char *int_array(const char *p, const char *end, Col *c, int *oom) {
    p = skip_ws(p, end);
    if (p >= end || *p != '[') return NULL;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        int64_t v;
        p = json_int(p, end, &v);
        if (p == NULL) return NULL;
        int r = col_push(c, v);
        if (r == -2) *oom = 1;
        if (r < 0) return NULL;
        p = skip_ws(p, end);
        if (p >= end) return NULL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        return *p == ']' ? p + 1 : NULL;
    }
}

/* Iterate an object's members: at '{' or ',' before a key; sets key bytes and returns the
 * start of the value, or returns NULL at the end ('}', *done = 1) or on bad text. */
static const char *next_member(const char *p, const char *end, int first, const char **k,
                               Py_ssize_t *kn, int *done) {
    p = skip_ws(p, end);
    if (p >= end) return NULL;
    if (first) {
        if (*p != '{') return NULL;
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}') {
            *done = 1;
            return NULL;
        }
    } else {
        if (*p == '}') {
            *done = 1;
            return NULL;
        }
        if (*p != ',') return NULL;
        p = skip_ws(p + 1, end);
    }
    int escaped;
    p = plain_string(p, end, k, kn, &escaped);
    if (p == NULL) return NULL;
    p = skip_ws(p, end);
    if (p >= end || *p != ':') return NULL;
    return skip_ws(p + 1, end);
}

typedef struct {
    Col ids, nchild, flat, hits;
    PyObject *names, *urls, *lines, *cols, *ticks;
    StrTable strs;
    int oom;
} ProfileCols;

/* {line, ticks} objects of a positionTicks array, as dicts. */
static const char *position_ticks(const char *p, const char *end, PyObject **out, int *oom) {
    p = skip_ws(p, end);
    if (p >= end || *p != '[') return NULL;
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        *oom = 1;
        return NULL;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') {
        *out = list;
        return p + 1;
    }
    for (;;) {
        int64_t line = 0, ticks = 0;
        int have = 0, done = 0, first = 1;
        const char *k;
        Py_ssize_t kn;
        for (;;) {
            const char *v = next_member(p, end, first, &k, &kn, &done);
            first = 0;
            if (v == NULL) break;
            int bit = KEY_IS(k, kn, "line") ? 1 : KEY_IS(k, kn, "ticks") ? 2 : 0;
            if (bit == 0 || (have & bit)) goto bad; /* other or repeated keys: the fallback */
            have |= bit;
            p = json_int(v, end, bit == 1 ? &line : &ticks);
            if (p == NULL) goto bad;
        }
        if (!done || have != 3) goto bad;
        p = skip_ws(p, end) + 1; /* past '}' */
        PyObject *d = Py_BuildValue("{sLsL}", "line", (long long)line, "ticks", (long long)ticks);
        if (list_push(list, d) < 0) {
            *oom = 1;
            goto bad;
        }
        p = skip_ws(p, end);
        if (p >= end) goto bad;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p != ']') goto bad;
        *out = list;
        return p + 1;
    }
bad:
    Py_DECREF(list);
    return NULL;
}

/* One node object at p ('{'). */
static const char *profile_node(const char *p, const char *end, ProfileCols *pc) {
    int64_t id = 0, hits = 0, line = -1, col = -1;
    int seen = 0, done = 0, first = 1;
    const char *name = NULL, *url = "", *k;
    Py_ssize_t name_n = 0, url_n = 0, kn;
    Py_ssize_t n_before = pc->flat.n;
    PyObject *ticks = NULL, *name_obj = NULL, *url_obj = NULL;
    for (;;) {
        const char *v = next_member(p, end, first, &k, &kn, &done);
        first = 0;
        if (v == NULL) break;
        int bit = KEY_IS(k, kn, "id")              ? 1
                  : KEY_IS(k, kn, "callFrame")     ? 2
                  : KEY_IS(k, kn, "hitCount")      ? 4
                  : KEY_IS(k, kn, "children")      ? 8
                  : KEY_IS(k, kn, "positionTicks") ? 16
                                                   : 0;
        if (bit & seen) goto bad;
        seen |= bit;
        if (bit == 1) {
            p = json_int(v, end, &id);
        } else if (bit == 4) {
            p = json_int(v, end, &hits);
        } else if (bit == 8) {
            p = int_array(v, end, &pc->flat, &pc->oom);
        } else if (bit == 16) {
            p = position_ticks(v, end, &ticks, &pc->oom);
        } else if (bit == 2) {
            int cseen = 0, cdone = 0, cfirst = 1;
            const char *q = v;
            for (;;) {
                const char *cv = next_member(q, end, cfirst, &k, &kn, &cdone);
                cfirst = 0;
                if (cv == NULL) break;
                int cbit = KEY_IS(k, kn, "functionName")   ? 1
                           : KEY_IS(k, kn, "url")          ? 2
                           : KEY_IS(k, kn, "lineNumber")   ? 4
                           : KEY_IS(k, kn, "columnNumber") ? 8
                                                           : 0;
                if (cbit & cseen) goto bad;
                cseen |= cbit;
                if (cbit == 1 || cbit == 2) {
                    int escaped;
                    const char **sp = cbit == 1 ? &name : &url;
                    Py_ssize_t *np = cbit == 1 ? &name_n : &url_n;
                    PyObject **op = cbit == 1 ? &name_obj : &url_obj;
                    q = plain_string(cv, end, sp, np, &escaped);
                    if (q == NULL && escaped) {
                        Py_CLEAR(*op);
                        q = escaped_string(cv, end, op);
                    }
                } else if (cbit == 4)
                    q = json_int(cv, end, &line);
                else if (cbit == 8)
                    q = json_int(cv, end, &col);
                else
                    q = skip_value(cv, end, 2);
                if (q == NULL) goto bad;
            }
            if (!cdone || !(cseen & 1)) goto bad;
            p = skip_ws(q, end) + 1; /* past the callFrame's '}' */
        } else {
            p = skip_value(v, end, 2);
        }
        if (p == NULL) goto bad;
    }
    if (!done || (seen & 3) != 3) goto bad;
    p = skip_ws(p, end) + 1; /* past the node's '}' */
    if (col_push(&pc->ids, id) < 0 || col_push(&pc->hits, hits) < 0 ||
        col_push(&pc->nchild, pc->flat.n - n_before) < 0)
        goto bad;
    /* an escaped string is its own object (the rare RegExp's source); the others shared */
    PyObject *s = name_obj != NULL ? name_obj : table_str(&pc->strs, name, name_n);
    name_obj = NULL;
    if (s == NULL || list_push(pc->names, s) < 0) goto bad;
    s = url_obj != NULL ? url_obj : table_str(&pc->strs, url, url_n);
    url_obj = NULL;
    if (s == NULL || list_push(pc->urls, s) < 0) goto bad;
    if (list_push(pc->lines, PyLong_FromLongLong(line)) < 0 ||
        list_push(pc->cols, PyLong_FromLongLong(col)) < 0)
        goto bad;
    if (ticks == NULL) {
        Py_INCREF(Py_None);
        ticks = Py_None;
    }
    int r = PyList_Append(pc->ticks, ticks);
    Py_DECREF(ticks);
    if (r < 0) return NULL;
    return p;
bad:
    Py_XDECREF(ticks);
    Py_XDECREF(name_obj);
    Py_XDECREF(url_obj);
    if (PyErr_Occurred()) pc->oom = 1;
    return NULL;
}

/* read_profile(buf, start) -> tuple | None
 *
 * The Profile object whose '{' is at `start` (e.g. inside the inspector's reply to
 * Profiler.stop): (ids, names, urls, lines, columns, child counts, children flattened,
 * hitCounts, positionTicks, startTime, endTime | None, samples, timeDeltas, end), the int64
 * columns as bytearrays, names and urls as lists of str (one object per distinct text),
 * lines and columns as lists of int (-1 where absent), positionTicks a list of None or
 * lists of {line, ticks} dicts, end the offset after the object. None for anything else
 * (escapes in a node's strings, repeated keys, a float where V8 writes integers, missing
 * members...): the caller reads the text with a JSON parser and checks it, wording any
 * error. Members V8 may add (scriptId, deoptReason...) are skipped. */
static PyObject *read_profile(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*n", &b, &start)) return NULL;
    PyObject *result = NULL;
    ProfileCols pc = {0};
    Col samples = {0}, deltas = {0};
    const char *base = b.buf;
    const char *end = base + b.len;
    int64_t start_time = 0, end_time = 0;
    int seen = 0, done = 0, first = 1;
    const char *k;
    Py_ssize_t kn;
    if (start < 0 || start > b.len) goto fallback;
    if (col_init(&pc.ids, 1024, 8) < 0 || col_init(&pc.nchild, 1024, 8) < 0 ||
        col_init(&pc.flat, 1024, 8) < 0 || col_init(&pc.hits, 1024, 8) < 0 ||
        col_init(&samples, 1024, 8) < 0 || col_init(&deltas, 1024, 8) < 0)
        goto fail;
    if (!(pc.names = PyList_New(0)) || !(pc.urls = PyList_New(0)) ||
        !(pc.lines = PyList_New(0)) || !(pc.cols = PyList_New(0)) || !(pc.ticks = PyList_New(0)))
        goto fail;
    const char *p = base + start;
    for (;;) {
        const char *v = next_member(p, end, first, &k, &kn, &done);
        first = 0;
        if (v == NULL) break;
        int bit = KEY_IS(k, kn, "nodes")        ? 1
                  : KEY_IS(k, kn, "startTime")  ? 2
                  : KEY_IS(k, kn, "endTime")    ? 4
                  : KEY_IS(k, kn, "samples")    ? 8
                  : KEY_IS(k, kn, "timeDeltas") ? 16
                                                : 0;
        if (bit & seen) goto fallback;
        seen |= bit;
        if (bit == 1) {
            p = skip_ws(v, end);
            if (p >= end || *p != '[') goto fallback;
            p = skip_ws(p + 1, end);
            if (p < end && *p == ']') {
                p++;
            } else {
                for (;;) {
                    p = profile_node(p, end, &pc);
                    if (p == NULL) goto checked;
                    p = skip_ws(p, end);
                    if (p >= end) goto fallback;
                    if (*p == ',') {
                        p = skip_ws(p + 1, end);
                        continue;
                    }
                    if (*p != ']') goto fallback;
                    p++;
                    break;
                }
            }
        } else if (bit == 2) {
            p = json_int(v, end, &start_time);
        } else if (bit == 4) {
            p = json_int(v, end, &end_time);
        } else if (bit == 8) {
            p = int_array(v, end, &samples, &pc.oom);
        } else if (bit == 16) {
            p = int_array(v, end, &deltas, &pc.oom);
        } else {
            p = skip_value(v, end, 1);
        }
        if (p == NULL) goto checked;
    }
    if (!done || !(seen & 1)) goto fallback;
    p = skip_ws(p, end) + 1; /* past the profile's '}' */
    if (col_finish(&pc.ids) < 0 || col_finish(&pc.nchild) < 0 || col_finish(&pc.flat) < 0 ||
        col_finish(&pc.hits) < 0 || col_finish(&samples) < 0 || col_finish(&deltas) < 0)
        goto fail;
    PyObject *et = NULL;
    if (seen & 4) {
        et = PyLong_FromLongLong(end_time);
    } else {
        et = Py_None;
        Py_INCREF(et);
    }
    if (et == NULL) goto fail;
    result = Py_BuildValue("(OOOOOOOOOLNOOn)", pc.ids.arr, pc.names, pc.urls, pc.lines, pc.cols,
                           pc.nchild.arr, pc.flat.arr, pc.hits.arr, pc.ticks,
                           (long long)start_time, et, samples.arr, deltas.arr,
                           (Py_ssize_t)(p - base));
    goto fail;
checked:
    if (pc.oom || PyErr_Occurred()) goto fail;
fallback:
    result = Py_None;
    Py_INCREF(result);
fail:
    table_free(&pc.strs);
    Py_XDECREF(pc.ids.arr);
    Py_XDECREF(pc.nchild.arr);
    Py_XDECREF(pc.flat.arr);
    Py_XDECREF(pc.hits.arr);
    Py_XDECREF(samples.arr);
    Py_XDECREF(deltas.arr);
    Py_XDECREF(pc.names);
    Py_XDECREF(pc.urls);
    Py_XDECREF(pc.lines);
    Py_XDECREF(pc.cols);
    Py_XDECREF(pc.ticks);
    PyBuffer_Release(&b);
    return result;
}

/* parse_float(text) -> float | None: one number read as read_samples reads it (tests). */
static PyObject *parse_float(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    double v = 0;
    int is_int;
    int64_t iv;
    const char *p = parse_number(b.buf, (const char *)b.buf + b.len, &v, &is_int, &iv);
    int delimited = p != NULL && (*p == ',' || *p == ']' || *p == '}' || is_ws(*p));
    PyBuffer_Release(&b);
    if (!delimited) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyMethodDef METHODS[] = {
    {"write_samples", write_samples, METH_VARARGS,
     "write_samples(head, times, stacks, markers, names, tail) -> bytes"},
    {"write_samples_to", write_samples_to, METH_VARARGS,
     "write_samples_to(fd, times, stacks, markers, names, threads) -> None"},
    {"write_stacks", write_stacks, METH_VARARGS, "write_stacks(parents, frames) -> bytes"},
    {"write_floats", write_floats, METH_O, "write_floats(values) -> bytes"},
    {"read_samples", read_samples, METH_VARARGS,
     "read_samples(buf, start, n_stacks, names) -> (times, stacks, markers, end) | None"},
    {"read_ints", read_ints, METH_VARARGS, "read_ints(buf, start) -> (int64s, end) | None"},
    {"read_floats", read_floats, METH_VARARGS,
     "read_floats(buf, start) -> (float64s, end) | None"},
    {"read_profile", read_profile, METH_VARARGS,
     "read_profile(buf, start) -> (ids, names, urls, lines, columns, child counts, children, "
     "hitCounts, positionTicks, startTime, endTime, samples, timeDeltas, end) | None"},
    {"parse_float", parse_float, METH_O,
     "parse_float(text) -> float | None: one number followed by a delimiter (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "jsprof.formats._columns",
    "JSON text to and from numpy columns for the big per-sample arrays.", -1, METHODS,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__columns(void) {
    POW5[0] = 1;
    for (int i = 1; i <= MAX_POW5; i++) POW5[i] = POW5[i - 1] * 5;
    return PyModule_Create(&MODULE);
}
