/* client.records._speedups: optional C decoder for a batch's records section.
 *
 * Byte layout decoded (DESIGN.md section 4, docs/record-format.md), msgpack:
 *
 *     records section = array(record_count) of record
 *     record          = array(5) [offset_delta int, timestamp_delta int,
 *                                 key bin|nil, value bin|nil, headers nil|array]
 *     headers         = array of array(2) [key str, value bin]
 *
 * Only this msgpack subset is parsed: fixarray/array16/array32, positive/negative fixint,
 * uint8-64, int8-64, nil, bin8/16/32, fixstr/str8/16/32 (strict UTF-8, as msgpack's
 * raw=False). Key, value and header items take any value of that subset, as the Python path
 * would (an int key decodes to an int there too); arrays nest at most MAX_DEPTH deep.
 *
 * decode_rows(section, record_type, prefix, base_offset, base_timestamp, record_count,
 *             no_headers) -> list | None
 *
 * builds one record_type instance per record (a tuple subclass: the NamedTuples Record and
 * ConsumerRecord of client/records/record.py) holding prefix's items, then offset
 * (base_offset + offset_delta), timestamp (base_timestamp + timestamp_delta; the
 * base_timestamp object itself when the delta is 0), key, value and headers (no_headers when
 * nil, else a tuple of tuples as msgpack's use_list=False). It returns None for ANY input it
 * does not fully understand (other msgpack types, wrong shapes, count mismatch, truncation,
 * trailing bytes, invalid UTF-8, int64 overflow): the caller then runs the Python decoder,
 * which gives the precise CorruptRecordError or the same result by other means. It raises only
 * for bad arguments (TypeError) or MemoryError.
 *
 * Safety: every read is bounds-checked against the buffer's end; every array length is checked
 * against the bytes left before anything is allocated for it (each element takes >= 1 byte);
 * every partially built object is released on the way out. The section is read through the
 * buffer protocol (bytes, memoryview, bytearray...; no copy), held for the call.
 *
 * Thread: called with the GIL held, from any thread; it calls no Python code.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 16

/* Results of the readers below. */
#define OK 1
#define MISMATCH 0 /* input outside the subset: no exception set, caller returns None */
#define FAILED -1  /* exception set (MemoryError) */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

static inline uint16_t
be16(const unsigned char *p)
{
    return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t
be64(const unsigned char *p)
{
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static inline Py_ssize_t
left(const Reader *r)
{
    return (Py_ssize_t)(r->end - r->p);
}

/* An array header; *n <= bytes left after it (each element needs at least one byte). */
static int
read_array_len(Reader *r, Py_ssize_t *n)
{
    uint64_t len;
    if (r->p >= r->end)
        return MISMATCH;
    unsigned char b = *r->p;
    if ((b & 0xf0) == 0x90) {
        len = b & 0x0f;
        r->p += 1;
    }
    else if (b == 0xdc) {
        if (left(r) < 3)
            return MISMATCH;
        len = be16(r->p + 1);
        r->p += 3;
    }
    else if (b == 0xdd) {
        if (left(r) < 5)
            return MISMATCH;
        len = be32(r->p + 1);
        r->p += 5;
    }
    else
        return MISMATCH;
    if (len > (uint64_t)left(r))
        return MISMATCH;
    *n = (Py_ssize_t)len;
    return OK;
}

/* An integer that fits int64 (a uint64 above INT64_MAX is a MISMATCH). */
static int
read_int(Reader *r, int64_t *v)
{
    if (r->p >= r->end)
        return MISMATCH;
    unsigned char b = *r->p;
    if (b <= 0x7f) {
        *v = b;
        r->p += 1;
        return OK;
    }
    if (b >= 0xe0) {
        *v = (int8_t)b;
        r->p += 1;
        return OK;
    }
    Py_ssize_t size;
    switch (b) {
    case 0xcc: case 0xd0: size = 1; break;
    case 0xcd: case 0xd1: size = 2; break;
    case 0xce: case 0xd2: size = 4; break;
    case 0xcf: case 0xd3: size = 8; break;
    default: return MISMATCH;
    }
    if (left(r) < 1 + size)
        return MISMATCH;
    const unsigned char *q = r->p + 1;
    switch (b) {
    case 0xcc: *v = q[0]; break;
    case 0xcd: *v = be16(q); break;
    case 0xce: *v = be32(q); break;
    case 0xcf: {
        uint64_t u = be64(q);
        if (u > (uint64_t)INT64_MAX)
            return MISMATCH;
        *v = (int64_t)u;
        break;
    }
    case 0xd0: *v = (int8_t)q[0]; break;
    case 0xd1: *v = (int16_t)be16(q); break;
    case 0xd2: *v = (int32_t)be32(q); break;
    default: *v = (int64_t)be64(q); break; /* 0xd3 */
    }
    r->p += 1 + size;
    return OK;
}

/* The length of a bin or str whose type byte `b` was read; *is_str tells which. */
static int
read_raw_len(Reader *r, unsigned char b, Py_ssize_t *n, int *is_str)
{
    uint64_t len;
    Py_ssize_t hdr;
    if ((b & 0xe0) == 0xa0) {
        *is_str = 1;
        len = b & 0x1f;
        hdr = 1;
    }
    else {
        switch (b) {
        case 0xc4: *is_str = 0; hdr = 2; break;
        case 0xc5: *is_str = 0; hdr = 3; break;
        case 0xc6: *is_str = 0; hdr = 5; break;
        case 0xd9: *is_str = 1; hdr = 2; break;
        case 0xda: *is_str = 1; hdr = 3; break;
        case 0xdb: *is_str = 1; hdr = 5; break;
        default: return MISMATCH;
        }
        if (left(r) < hdr)
            return MISMATCH;
        len = hdr == 2 ? r->p[1] : hdr == 3 ? be16(r->p + 1) : be32(r->p + 1);
    }
    if (len > (uint64_t)(left(r) - hdr))
        return MISMATCH;
    r->p += hdr;
    *n = (Py_ssize_t)len;
    return OK;
}

static int read_obj(Reader *r, PyObject **out, int depth);

/* Untrack a tuple (or tuple subclass instance) whose items the cyclic GC does not track
 * (ints, bytes, str, None, untracked tuples): it cannot be part of a reference cycle, so the
 * collector need never look at it. CPython does this lazily for exact tuples during a young
 * collection (_PyTuple_MaybeUntrack) but never for named tuples; doing it at birth keeps a
 * fetch's records out of every collection without touching the host's GC settings. */
static void
untrack_if_atomic(PyObject *t)
{
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(t, i);
        if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o))
            return;
    }
    PyObject_GC_UnTrack(t);
}

/* An array as a tuple of its items (msgpack's use_list=False). */
static int
read_tuple(Reader *r, PyObject **out, int depth)
{
    Py_ssize_t n;
    int rc;
    if (depth >= MAX_DEPTH)
        return MISMATCH;
    if ((rc = read_array_len(r, &n)) != OK)
        return rc;
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return FAILED;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if ((rc = read_obj(r, &item, depth + 1)) != OK) {
            Py_DECREF(t);
            return rc;
        }
        PyTuple_SET_ITEM(t, i, item);
    }
    untrack_if_atomic(t);
    *out = t;
    return OK;
}

/* Any value of the subset as msgpack.unpackb(raw=False, use_list=False) would return it. */
static int
read_obj(Reader *r, PyObject **out, int depth)
{
    if (r->p >= r->end)
        return MISMATCH;
    unsigned char b = *r->p;
    if (b == 0xc0) {
        r->p += 1;
        *out = Py_NewRef(Py_None);
        return OK;
    }
    if (b == 0xc4 || b == 0xc5 || b == 0xc6 || (b & 0xe0) == 0xa0 || b == 0xd9 || b == 0xda ||
        b == 0xdb) {
        Py_ssize_t n;
        int is_str;
        if (read_raw_len(r, b, &n, &is_str) != OK)
            return MISMATCH;
        const char *s = (const char *)r->p;
        r->p += n;
        if (!is_str) {
            *out = PyBytes_FromStringAndSize(s, n);
            return *out == NULL ? FAILED : OK;
        }
        *out = PyUnicode_DecodeUTF8(s, n, NULL);
        if (*out != NULL)
            return OK;
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return MISMATCH;
        }
        return FAILED;
    }
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd)
        return read_tuple(r, out, depth);
    if (b == 0xcf) { /* uint64: may exceed int64 */
        if (left(r) < 9)
            return MISMATCH;
        uint64_t u = be64(r->p + 1);
        r->p += 9;
        *out = PyLong_FromUnsignedLongLong(u);
        return *out == NULL ? FAILED : OK;
    }
    int64_t v;
    if (read_int(r, &v) != OK)
        return MISMATCH;
    *out = PyLong_FromLongLong(v);
    return *out == NULL ? FAILED : OK;
}

/* Headers are ((str, bytes | None), ...). */
static int
well_formed_headers(PyObject *t)
{
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = PyTuple_GET_ITEM(t, i);
        if (!PyTuple_CheckExact(h) || PyTuple_GET_SIZE(h) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(h, 0)))
            return 0;
        PyObject *v = PyTuple_GET_ITEM(h, 1);
        if (v != Py_None && !PyBytes_CheckExact(v))
            return 0;
    }
    return 1;
}

/* Fills items [k, k+5) of rec from one record; on FAILED/MISMATCH the caller drops rec. */
static int
read_record(Reader *r, PyObject *rec, Py_ssize_t k, int64_t base_offset, int64_t base_ts,
            PyObject *base_ts_obj, PyObject *no_headers)
{
    int64_t od, td, sum;
    PyObject *o;
    int rc;

    if (r->p >= r->end || *r->p != 0x95) /* a 5-element fixarray; anything else is odd */
        return MISMATCH;
    r->p += 1;
    if (read_int(r, &od) != OK || read_int(r, &td) != OK)
        return MISMATCH;

    if (__builtin_add_overflow(base_offset, od, &sum))
        return MISMATCH;
    if ((o = PyLong_FromLongLong(sum)) == NULL)
        return FAILED;
    PyTuple_SET_ITEM(rec, k, o);

    if (td == 0)
        o = Py_NewRef(base_ts_obj);
    else {
        if (__builtin_add_overflow(base_ts, td, &sum))
            return MISMATCH;
        if ((o = PyLong_FromLongLong(sum)) == NULL)
            return FAILED;
    }
    PyTuple_SET_ITEM(rec, k + 1, o);

    for (int i = 2; i < 4; i++) { /* key, value: bin / nil fast, the rest generic */
        if (r->p >= r->end)
            return MISMATCH;
        unsigned char b = *r->p;
        if (b == 0xc0) {
            r->p += 1;
            o = Py_NewRef(Py_None);
        }
        else if (b == 0xc4 && left(r) >= 2 && r->p[1] <= left(r) - 2) {
            Py_ssize_t n = r->p[1];
            o = PyBytes_FromStringAndSize((const char *)r->p + 2, n);
            if (o == NULL)
                return FAILED;
            r->p += 2 + n;
        }
        else if ((rc = read_obj(r, &o, 1)) != OK)
            return rc;
        else if (!PyBytes_CheckExact(o) && !PyUnicode_CheckExact(o)) { /* bin, str or nil */
            Py_DECREF(o);
            return MISMATCH;
        }
        PyTuple_SET_ITEM(rec, k + i, o);
    }

    if (r->p >= r->end)
        return MISMATCH;
    if (*r->p == 0xc0) {
        r->p += 1;
        o = Py_NewRef(no_headers);
    }
    else if ((rc = read_tuple(r, &o, 1)) != OK) /* only nil or an array: else fall back */
        return rc;
    else if (!well_formed_headers(o)) {
        Py_DECREF(o);
        return MISMATCH;
    }
    PyTuple_SET_ITEM(rec, k + 4, o);
    return OK;
}

static PyObject *
decode_rows(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyTypeObject *type;
    PyObject *prefix, *base_ts_obj, *no_headers;
    long long base_offset;
    Py_ssize_t count;

    if (!PyArg_ParseTuple(args, "y*O!O!LO!nO:decode_rows", &view, &PyType_Type, &type,
                          &PyTuple_Type, &prefix, &base_offset, &PyLong_Type, &base_ts_obj,
                          &count, &no_headers))
        return NULL;
    PyObject *result = NULL;
    PyObject *list = NULL;
    if (!PyType_IsSubtype(type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "decode_rows: record_type must be a tuple subclass");
        goto done;
    }
    long long base_ts = PyLong_AsLongLong(base_ts_obj);
    if (base_ts == -1 && PyErr_Occurred())
        goto done;

    Reader r = {(const unsigned char *)view.buf, (const unsigned char *)view.buf + view.len};
    Py_ssize_t n;
    if (read_array_len(&r, &n) != OK || n != count) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t k = PyTuple_GET_SIZE(prefix);
    if ((list = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = type->tp_alloc(type, k + 5);
        if (rec == NULL)
            goto done;
        for (Py_ssize_t j = 0; j < k; j++)
            PyTuple_SET_ITEM(rec, j, Py_NewRef(PyTuple_GET_ITEM(prefix, j)));
        int rc = read_record(&r, rec, k, base_offset, base_ts, base_ts_obj, no_headers);
        if (rc != OK) {
            Py_DECREF(rec); /* tuple dealloc skips the items still NULL */
            if (rc == MISMATCH)
                result = Py_NewRef(Py_None);
            goto done;
        }
        untrack_if_atomic(rec);
        PyList_SET_ITEM(list, i, rec);
    }
    if (r.p != r.end) { /* trailing bytes */
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = list;
    list = NULL;
done:
    Py_XDECREF(list); /* list dealloc skips the slots still NULL */
    PyBuffer_Release(&view);
    return result;
}

/* ---- encoder ------------------------------------------------------------------------------
 *
 * encode_rows(records, default_timestamp) -> (section bytes, base_timestamp, max_timestamp) | None
 *
 * The records section client.records.builder.build_batch packs with msgpack for `records`, a
 * list of (key, value) or (key, value, None, timestamp_ms | None) tuples with key and value
 * exact bytes or None: array(n) of [i, timestamp - first timestamp, key, value, nil], ints in
 * msgpack's smallest encoding, bytes as bin8/16/32, byte for byte what msgpack.packb(...,
 * use_bin_type=True) writes. A record without a timestamp gets default_timestamp; base is the
 * first record's timestamp, max the largest. Returns None for anything else (other types,
 * headers, a list that is not a list, int64 overflow), and the caller packs in Python.
 * Two passes: check and size everything, then allocate once and write.
 */

static inline Py_ssize_t
int_size(int64_t v)
{
    if (v >= 0) {
        if (v < 128) return 1;
        if (v <= 0xFF) return 2;
        if (v <= 0xFFFF) return 3;
        if (v <= 0xFFFFFFFFLL) return 5;
        return 9;
    }
    if (v >= -32) return 1;
    if (v >= INT8_MIN) return 2;
    if (v >= INT16_MIN) return 3;
    if (v >= INT32_MIN) return 5;
    return 9;
}

static inline unsigned char *
put_be(unsigned char *w, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        w[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
    return w + n;
}

static inline unsigned char *
put_int(unsigned char *w, int64_t v)
{
    if (v >= 0) {
        if (v < 128) { *w++ = (unsigned char)v; return w; }
        if (v <= 0xFF) { *w++ = 0xCC; return put_be(w, (uint64_t)v, 1); }
        if (v <= 0xFFFF) { *w++ = 0xCD; return put_be(w, (uint64_t)v, 2); }
        if (v <= 0xFFFFFFFFLL) { *w++ = 0xCE; return put_be(w, (uint64_t)v, 4); }
        *w++ = 0xCF;
        return put_be(w, (uint64_t)v, 8);
    }
    if (v >= -32) { *w++ = (unsigned char)(0xE0 | (v & 0x1F)); return w; }
    if (v >= INT8_MIN) { *w++ = 0xD0; return put_be(w, (uint64_t)v, 1); }
    if (v >= INT16_MIN) { *w++ = 0xD1; return put_be(w, (uint64_t)v, 2); }
    if (v >= INT32_MIN) { *w++ = 0xD2; return put_be(w, (uint64_t)v, 4); }
    *w++ = 0xD3;
    return put_be(w, (uint64_t)v, 8);
}

/* Size of key/value `o` packed (nil or bin), or -1 when it is neither None nor exact bytes. */
static inline Py_ssize_t
bin_size(PyObject *o)
{
    if (o == Py_None) return 1;
    if (!PyBytes_CheckExact(o)) return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n <= 0xFF) return 2 + n;
    if (n <= 0xFFFF) return 3 + n;
    if ((uint64_t)n <= 0xFFFFFFFFULL) return 5 + n;
    return -1;
}

static inline unsigned char *
put_bin(unsigned char *w, PyObject *o)
{
    if (o == Py_None) { *w++ = 0xC0; return w; }
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n <= 0xFF) { *w++ = 0xC4; w = put_be(w, (uint64_t)n, 1); }
    else if (n <= 0xFFFF) { *w++ = 0xC5; w = put_be(w, (uint64_t)n, 2); }
    else { *w++ = 0xC6; w = put_be(w, (uint64_t)n, 4); }
    memcpy(w, PyBytes_AS_STRING(o), (size_t)n);
    return w + n;
}

/* The timestamp of record tuple `t` (2 or 4 items, already checked), or MISMATCH. */
static inline int
record_ts(PyObject *t, int64_t default_ts, int64_t *ts)
{
    if (PyTuple_GET_SIZE(t) == 2) {
        *ts = default_ts;
        return OK;
    }
    if (PyTuple_GET_ITEM(t, 2) != Py_None) return MISMATCH; /* headers: Python path */
    PyObject *o = PyTuple_GET_ITEM(t, 3);
    if (o == Py_None) {
        *ts = default_ts;
        return OK;
    }
    if (!PyLong_CheckExact(o)) return MISMATCH;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return MISMATCH;
    }
    *ts = (int64_t)v;
    return OK;
}

static PyObject *
encode_rows(PyObject *self, PyObject *args)
{
    PyObject *records;
    long long default_ts;
    (void)self;
    if (!PyArg_ParseTuple(args, "OL:encode_rows", &records, &default_ts)) return NULL;
    if (!PyList_CheckExact(records) || PyList_GET_SIZE(records) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(records);
    if ((uint64_t)n > 0xFFFFFFFFULL) Py_RETURN_NONE;
    int64_t first = 0, max = 0;
    Py_ssize_t size = n < 16 ? 1 : (n <= 0xFFFF ? 3 : 5);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(t)) Py_RETURN_NONE;
        Py_ssize_t len = PyTuple_GET_SIZE(t);
        if (len != 2 && len != 4) Py_RETURN_NONE;
        int64_t ts;
        if (record_ts(t, (int64_t)default_ts, &ts) != OK) Py_RETURN_NONE;
        if (i == 0) first = max = ts;
        else if (ts > max) max = ts;
        int64_t delta;
        if (__builtin_sub_overflow(ts, first, &delta)) Py_RETURN_NONE;
        Py_ssize_t k = bin_size(PyTuple_GET_ITEM(t, 0));
        Py_ssize_t v = bin_size(PyTuple_GET_ITEM(t, 1));
        if (k < 0 || v < 0) Py_RETURN_NONE;
        if (size > PY_SSIZE_T_MAX - 64 - k - v) Py_RETURN_NONE;
        size += 2 + int_size((int64_t)i) + int_size(delta) + k + v;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    if (n < 16) *w++ = (unsigned char)(0x90 | n);
    else if (n <= 0xFFFF) { *w++ = 0xDC; w = put_be(w, (uint64_t)n, 2); }
    else { *w++ = 0xDD; w = put_be(w, (uint64_t)n, 4); }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(records, i);
        int64_t ts = 0;
        (void)record_ts(t, (int64_t)default_ts, &ts); /* checked in the first pass */
        *w++ = 0x95;
        w = put_int(w, (int64_t)i);
        w = put_int(w, ts - first);
        w = put_bin(w, PyTuple_GET_ITEM(t, 0));
        w = put_bin(w, PyTuple_GET_ITEM(t, 1));
        *w++ = 0xC0;
    }
    if (w != (unsigned char *)PyBytes_AS_STRING(out) + size) { /* cannot happen: sized above */
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "encode_rows: size mismatch");
        return NULL;
    }
    return Py_BuildValue("(NLL)", out, (long long)first, (long long)max);
}

/* gc_untrack(obj) / gc_track(obj): take a container the caller knows cannot be part of a
 * reference cycle out of the cyclic GC's lists, and put it back once it may be (the producer's
 * DeliveryFuture: untracked while it holds only strings, ints and None, tracked again before
 * it holds a callback, an exception or a waiter). Neither touches the GC's settings. */
static PyObject *
gc_untrack(PyObject *self, PyObject *obj)
{
    (void)self;
    if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj))
        PyObject_GC_UnTrack(obj);
    Py_RETURN_NONE;
}

static PyObject *
gc_track(PyObject *self, PyObject *obj)
{
    (void)self;
    if (PyObject_IS_GC(obj) && !PyObject_GC_IsTracked(obj))
        PyObject_GC_Track(obj);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_rows", decode_rows, METH_VARARGS,
     "decode_rows(section, record_type, prefix, base_offset, base_timestamp, record_count, "
     "no_headers) -> list | None\n\n"
     "The records of a msgpack records section as record_type(*prefix, offset, timestamp, "
     "key, value, headers or no_headers); None when the section is anything but the plain "
     "expected shape (the caller then decodes it in Python)."},
    {"encode_rows", encode_rows, METH_VARARGS,
     "encode_rows(records, default_timestamp) -> (section, base_timestamp, max_timestamp) | "
     "None\n\n"
     "msgpack.packb of build_batch's rows for (key, value) / (key, value, None, ts) tuples of "
     "bytes or None; None for anything else (the caller packs in Python)."},
    {"gc_untrack", gc_untrack, METH_O,
     "gc_untrack(obj) -> None\n\nTake obj out of the cyclic GC's lists (it must not be able "
     "to be part of a reference cycle until gc_track(obj))."},
    {"gc_track", gc_track, METH_O, "gc_track(obj) -> None\n\nUndo gc_untrack(obj)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef_Slot slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "client.records._speedups",
    .m_doc = "Optional C decoder and encoder for record batch sections (client/records/reader.py, builder.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module);
}
