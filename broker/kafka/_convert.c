/* broker.kafka._convert: optional C transcoder between Kafka's records section and Gregor's.
 *
 * Byte layouts (broker/kafka/records.py has them in full, and the Python reference):
 *
 *   Kafka, per record:   length varint | attributes int8 | timestamp_delta varlong |
 *                        offset_delta varint | key_length varint (-1 null) key |
 *                        value_length varint (-1 null) value | header_count varint |
 *                        header_count x (key_length varint key, value_length varint value)
 *                        (varints zigzag-encoded, at most 10 bytes)
 *   Gregor, the section: msgpack array(count) of array(5) [offset_delta int,
 *                        timestamp_delta int, key bin|nil, value bin|nil,
 *                        headers nil | array of array(2) [key str, value bin|nil]]
 *
 * kafka_to_msgpack(section, count) -> bytes | None
 *     writes exactly what msgpack.packb(rows, use_bin_type=True) writes for the rows the Python
 *     path builds (smallest int, bin, str and array encodings);
 * msgpack_to_kafka(section, count) -> bytes | None
 *     writes exactly what records.kafka_section writes.
 *
 * Both return None for ANY input they do not fully understand (truncation, trailing bytes,
 * wrong counts or shapes, other msgpack types, a null or non-UTF-8 header key, a varint past
 * 10 bytes or int64): the caller then runs the Python path, which gives the precise
 * CorruptRecordError or the same result by other means. They raise only TypeError for bad
 * arguments and MemoryError.
 *
 * Safety: every read is bounds-checked against the section's end (and a Kafka field against
 * its record's end); output grows through one checked buffer. The section is read through
 * the buffer protocol, held for the call.
 *
 * Thread: called with the GIL held, from any thread; it calls no Python code.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    unsigned char *p;
    size_t len, cap;
} Out;

static int out_reserve(Out *o, size_t n) {
    if (o->cap - o->len >= n) return 0;
    size_t cap = o->cap ? o->cap : 256;
    while (cap - o->len < n) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) return -1;
        cap *= 2;
    }
    unsigned char *p = PyMem_Realloc(o->p, cap);
    if (p == NULL) return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}

static int out_put(Out *o, const void *src, size_t n) {
    if (out_reserve(o, n) < 0) return -1;
    memcpy(o->p + o->len, src, n);
    o->len += n;
    return 0;
}

static int out_byte(Out *o, unsigned char b) { return out_put(o, &b, 1); }

static int out_be(Out *o, unsigned char tag, uint64_t v, int bytes) {
    unsigned char buf[9];
    buf[0] = tag;
    for (int i = 0; i < bytes; i++) buf[1 + i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    return out_put(o, buf, 1 + (size_t)bytes);
}

/* -- Kafka varints ------------------------------------------------------------------------- */

/* 1 ok, 0 not understood */
static int read_varint(const unsigned char *b, Py_ssize_t end, Py_ssize_t *pos, int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= end) return 0;
        unsigned char c = b[(*pos)++];
        if (i == 9 && c > 1) return 0; /* past 64 bits */
        raw |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
    }
    return 0;
}

static int write_varint(Out *o, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    unsigned char buf[10];
    int n = 0;
    while (z > 0x7f) {
        buf[n++] = (unsigned char)((z & 0x7f) | 0x80);
        z >>= 7;
    }
    buf[n++] = (unsigned char)z;
    return out_put(o, buf, (size_t)n);
}

/* -- msgpack writing ----------------------------------------------------------------------- */

static int mp_int(Out *o, int64_t v) {
    if (v >= 0) {
        if (v < 128) return out_byte(o, (unsigned char)v);
        if (v < 256) return out_be(o, 0xcc, (uint64_t)v, 1);
        if (v < 65536) return out_be(o, 0xcd, (uint64_t)v, 2);
        if (v <= 0xffffffffLL) return out_be(o, 0xce, (uint64_t)v, 4);
        return out_be(o, 0xcf, (uint64_t)v, 8);
    }
    if (v >= -32) return out_byte(o, (unsigned char)(0xe0 | (v & 0x1f)));
    if (v >= -128) return out_be(o, 0xd0, (uint64_t)v & 0xff, 1);
    if (v >= -32768) return out_be(o, 0xd1, (uint64_t)v & 0xffff, 2);
    if (v >= -2147483648LL) return out_be(o, 0xd2, (uint64_t)v & 0xffffffffULL, 4);
    return out_be(o, 0xd3, (uint64_t)v, 8);
}

static int mp_array(Out *o, uint64_t n) {
    if (n < 16) return out_byte(o, (unsigned char)(0x90 | n));
    if (n < 65536) return out_be(o, 0xdc, n, 2);
    return out_be(o, 0xdd, n, 4);
}

static int mp_bin(Out *o, const unsigned char *p, uint64_t n) {
    int r;
    if (n < 256) r = out_be(o, 0xc4, n, 1);
    else if (n < 65536) r = out_be(o, 0xc5, n, 2);
    else r = out_be(o, 0xc6, n, 4);
    return r < 0 ? r : out_put(o, p, (size_t)n);
}

static int mp_str(Out *o, const unsigned char *p, uint64_t n) {
    int r;
    if (n < 32) r = out_byte(o, (unsigned char)(0xa0 | n));
    else if (n < 256) r = out_be(o, 0xd9, n, 1);
    else if (n < 65536) r = out_be(o, 0xda, n, 2);
    else r = out_be(o, 0xdb, n, 4);
    return r < 0 ? r : out_put(o, p, (size_t)n);
}

static int valid_utf8(const unsigned char *s, Py_ssize_t n) {
    PyObject *u = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (u == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(u);
    return 1;
}

/* -- Kafka -> msgpack ---------------------------------------------------------------------- */

/* a Kafka length-prefixed field inside [*pos, end): 1 ok (*data NULL for null), 0 not
 * understood */
static int read_field(const unsigned char *b, Py_ssize_t end, Py_ssize_t *pos,
                      const unsigned char **data, int64_t *len) {
    if (!read_varint(b, end, pos, len)) return 0;
    if (*len == -1) {
        *data = NULL;
        return 1;
    }
    if (*len < 0 || *len > end - *pos) return 0;
    *data = b + *pos;
    *pos += (Py_ssize_t)*len;
    return 1;
}

/* 1 ok, 0 not understood, -1 memory error */
static int k2m(const unsigned char *b, Py_ssize_t n, int64_t count, Out *o) {
    Py_ssize_t pos = 0;
    if (count < 0 || count > n) return 0;  /* each record takes >= 1 byte */
    if (mp_array(o, (uint64_t)count) < 0) return -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts, od, klen, vlen, hcount;
        const unsigned char *key, *value;
        if (!read_varint(b, n, &pos, &length)) return 0;
        if (length < 1 || length > n - pos) return 0;
        Py_ssize_t end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        if (!read_varint(b, end, &pos, &ts) || !read_varint(b, end, &pos, &od)) return 0;
        if (!read_field(b, end, &pos, &key, &klen)) return 0;
        if (!read_field(b, end, &pos, &value, &vlen)) return 0;
        if (!read_varint(b, end, &pos, &hcount) || hcount < 0 || hcount > end - pos) return 0;
        if (mp_array(o, 5) < 0 || mp_int(o, od) < 0 || mp_int(o, ts) < 0) return -1;
        if ((key ? mp_bin(o, key, (uint64_t)klen) : out_byte(o, 0xc0)) < 0) return -1;
        if ((value ? mp_bin(o, value, (uint64_t)vlen) : out_byte(o, 0xc0)) < 0) return -1;
        if (hcount == 0) {
            if (out_byte(o, 0xc0) < 0) return -1;
        } else {
            if (mp_array(o, (uint64_t)hcount) < 0) return -1;
            for (int64_t h = 0; h < hcount; h++) {
                const unsigned char *hk, *hv;
                int64_t hklen, hvlen;
                if (!read_field(b, end, &pos, &hk, &hklen) || hk == NULL) return 0;
                if (!read_field(b, end, &pos, &hv, &hvlen)) return 0;
                if (!valid_utf8(hk, (Py_ssize_t)hklen)) return 0;
                if (mp_array(o, 2) < 0 || mp_str(o, hk, (uint64_t)hklen) < 0) return -1;
                if ((hv ? mp_bin(o, hv, (uint64_t)hvlen) : out_byte(o, 0xc0)) < 0) return -1;
            }
        }
        if (pos != end) return 0;
    }
    return pos == n ? 1 : 0;
}

/* -- msgpack -> Kafka ---------------------------------------------------------------------- */

static int mp_read_be(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int bytes,
                      uint64_t *v) {
    if (bytes > n - *pos) return 0;
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) x = (x << 8) | b[*pos + i];
    *pos += bytes;
    *v = x;
    return 1;
}

static int mp_read_int(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int64_t *v) {
    uint64_t x;
    if (*pos >= n) return 0;
    unsigned char t = b[(*pos)++];
    if (t < 0x80) { *v = t; return 1; }
    if (t >= 0xe0) { *v = (int8_t)t; return 1; }
    switch (t) {
    case 0xcc: if (!mp_read_be(b, n, pos, 1, &x)) return 0; *v = (int64_t)x; return 1;
    case 0xcd: if (!mp_read_be(b, n, pos, 2, &x)) return 0; *v = (int64_t)x; return 1;
    case 0xce: if (!mp_read_be(b, n, pos, 4, &x)) return 0; *v = (int64_t)x; return 1;
    case 0xcf: if (!mp_read_be(b, n, pos, 8, &x) || x > INT64_MAX) return 0;
               *v = (int64_t)x; return 1;
    case 0xd0: if (!mp_read_be(b, n, pos, 1, &x)) return 0; *v = (int8_t)x; return 1;
    case 0xd1: if (!mp_read_be(b, n, pos, 2, &x)) return 0; *v = (int16_t)x; return 1;
    case 0xd2: if (!mp_read_be(b, n, pos, 4, &x)) return 0; *v = (int32_t)x; return 1;
    case 0xd3: if (!mp_read_be(b, n, pos, 8, &x)) return 0; *v = (int64_t)x; return 1;
    }
    return 0;
}

static int mp_read_array(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, uint64_t *len) {
    if (*pos >= n) return 0;
    unsigned char t = b[(*pos)++];
    if ((t & 0xf0) == 0x90) { *len = t & 0x0f; return 1; }
    if (t == 0xdc) return mp_read_be(b, n, pos, 2, len);
    if (t == 0xdd) return mp_read_be(b, n, pos, 4, len);
    return 0;
}

/* bin, str (allow_str) or nil: 1 ok (*data NULL for nil), 0 not understood */
static int mp_read_bytes(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int allow_str,
                         const unsigned char **data, uint64_t *len) {
    if (*pos >= n) return 0;
    unsigned char t = b[(*pos)++];
    int ok;
    int is_str = 0;
    if (t == 0xc0) { *data = NULL; *len = 0; return 1; }
    if (t == 0xc4) ok = mp_read_be(b, n, pos, 1, len);
    else if (t == 0xc5) ok = mp_read_be(b, n, pos, 2, len);
    else if (t == 0xc6) ok = mp_read_be(b, n, pos, 4, len);
    else if (allow_str && (t & 0xe0) == 0xa0) { *len = t & 0x1f; ok = is_str = 1; }
    else if (allow_str && t == 0xd9) ok = is_str = mp_read_be(b, n, pos, 1, len);
    else if (allow_str && t == 0xda) ok = is_str = mp_read_be(b, n, pos, 2, len);
    else if (allow_str && t == 0xdb) ok = is_str = mp_read_be(b, n, pos, 4, len);
    else return 0;
    if (!ok || *len > (uint64_t)(n - *pos)) return 0;
    /* a str must be UTF-8, as msgpack's raw=False decoding requires */
    if (is_str && !valid_utf8(b + *pos, (Py_ssize_t)*len)) return 0;
    *data = b + *pos;
    *pos += (Py_ssize_t)*len;
    return 1;
}

static int put_field(Out *o, const unsigned char *data, uint64_t len) {
    if (data == NULL) return out_byte(o, 1); /* zigzag(-1) */
    if (write_varint(o, (int64_t)len) < 0) return -1;
    return out_put(o, data, (size_t)len);
}

/* 1 ok, 0 not understood, -1 memory error */
static int m2k(const unsigned char *b, Py_ssize_t n, int64_t count, Out *o, Out *body) {
    Py_ssize_t pos = 0;
    uint64_t rows;
    if (!mp_read_array(b, n, &pos, &rows) || count < 0 || rows != (uint64_t)count) return 0;
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t five, klen, vlen, hcount;
        int64_t od, ts;
        const unsigned char *key, *value;
        if (!mp_read_array(b, n, &pos, &five) || five != 5) return 0;
        if (!mp_read_int(b, n, &pos, &od) || !mp_read_int(b, n, &pos, &ts)) return 0;
        if (!mp_read_bytes(b, n, &pos, 1, &key, &klen)) return 0;
        if (!mp_read_bytes(b, n, &pos, 1, &value, &vlen)) return 0;
        body->len = 0;
        if (out_byte(body, 0) < 0 || write_varint(body, ts) < 0 || write_varint(body, od) < 0)
            return -1;
        if (put_field(body, key, klen) < 0 || put_field(body, value, vlen) < 0) return -1;
        if (pos >= n) return 0;
        if (b[pos] == 0xc0) {
            pos++;
            if (out_byte(body, 0) < 0) return -1;
        } else {
            if (!mp_read_array(b, n, &pos, &hcount) || hcount > (uint64_t)(n - pos)) return 0;
            if (write_varint(body, (int64_t)hcount) < 0) return -1;
            for (uint64_t h = 0; h < hcount; h++) {
                uint64_t two, hklen, hvlen;
                const unsigned char *hk, *hv;
                if (!mp_read_array(b, n, &pos, &two) || two != 2) return 0;
                if (!mp_read_bytes(b, n, &pos, 1, &hk, &hklen) || hk == NULL) return 0;
                if (!mp_read_bytes(b, n, &pos, 0, &hv, &hvlen)) return 0;
                if (put_field(body, hk, hklen) < 0 || put_field(body, hv, hvlen) < 0) return -1;
            }
        }
        if (write_varint(o, (int64_t)body->len) < 0 || out_put(o, body->p, body->len) < 0)
            return -1;
    }
    return pos == n ? 1 : 0;
}

/* -- module -------------------------------------------------------------------------------- */

typedef int (*convert_fn)(const unsigned char *, Py_ssize_t, int64_t, Out *, Out *);

static int k2m_adapter(const unsigned char *b, Py_ssize_t n, int64_t c, Out *o, Out *unused) {
    (void)unused;
    return k2m(b, n, c, o);
}

static PyObject *run(PyObject *args, convert_fn fn) {
    Py_buffer view;
    long long count;
    if (!PyArg_ParseTuple(args, "y*L", &view, &count)) return NULL;
    Out o = {NULL, 0, 0}, body = {NULL, 0, 0};
    int r = fn((const unsigned char *)view.buf, view.len, (int64_t)count, &o, &body);
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (r < 0) PyErr_NoMemory();
    else if (r == 0) result = Py_NewRef(Py_None);
    else result = PyBytes_FromStringAndSize((const char *)o.p, (Py_ssize_t)o.len);
    PyMem_Free(o.p);
    PyMem_Free(body.p);
    return result;
}

static PyObject *kafka_to_msgpack(PyObject *self, PyObject *args) {
    (void)self;
    return run(args, k2m_adapter);
}

static PyObject *msgpack_to_kafka(PyObject *self, PyObject *args) {
    (void)self;
    return run(args, m2k);
}

static PyMethodDef methods[] = {
    {"kafka_to_msgpack", kafka_to_msgpack, METH_VARARGS,
     "kafka_to_msgpack(section, count) -> bytes | None: Kafka's records section as Gregor's."},
    {"msgpack_to_kafka", msgpack_to_kafka, METH_VARARGS,
     "msgpack_to_kafka(section, count) -> bytes | None: Gregor's records section as Kafka's."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_convert", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__convert(void) { return PyModule_Create(&module); }
