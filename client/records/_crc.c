/* client.records._crc: CRC-32C (Castagnoli) with the SSE4.2 crc32 instruction, on any buffer.
 *
 * crc32c(data, crc=0) -> int    CRC-32C of `data` (anything with the buffer protocol: bytes,
 *                               bytearray, memoryview; read in place, no copy), continuing from
 *                               `crc` (the result of a previous call), like crcmod's and
 *                               google-crc32c's extend().
 * validate_batches(buf, max_bytes, header_type) -> list | None
 *                               [(position, header_type(*fields)), ...] of the record batches
 *                               that fill `buf` (client/records/header.py's layout), each
 *                               passing header.validate's checks (magic, lengths, counts, CRC)
 *                               and, when max_bytes >= 0, no larger than max_bytes; None when
 *                               `buf` is empty or any batch fails any check (the caller then
 *                               runs the Python checks, which raise the precise error).
 * HARDWARE                      True when this CPU has SSE4.2 (checked once at import). When
 *                               False, crc32c() raises RuntimeError and client/records/crc.py
 *                               uses another backend.
 *
 * Why: google-crc32c's extend() takes only `bytes`, so every CRC of a slice of a larger buffer
 * (each batch of a Produce request or of a Fetch answer) first copied the slice. From 256 KiB
 * the input is split into three streams run side by side and joined with zlib's crc32_combine
 * method (the Castagnoli polynomial), ~2-3x the speed of one stream. The GIL is kept: a 1 MB
 * batch takes ~0.06 ms, and releasing it let the producer's other thread take the GIL for a
 * whole switch interval (100 B produce_bench: 1.0 against 1.1-1.4 M records/s).
 * Built only on x86-64 with GCC or Clang; elsewhere the module still builds and HARDWARE is
 * False.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_BUILD 1
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = (uint32_t)~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

/* zlib's crc32_combine with the Castagnoli polynomial: the CRC of A followed by B from the
 * CRC of A (crc1) and the CRC of B alone (crc2, len2 bytes). O(log len2) 32x32 GF(2) matrix
 * squarings, ~20-50 us: used only to join the three streams of a large input. */
static uint32_t
gf2_matrix_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void
gf2_matrix_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}

static uint32_t
crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
    uint32_t even[32], odd[32], row = 1;
    if (len2 == 0) return crc1;
    odd[0] = 0x82F63B78u; /* the reflected Castagnoli polynomial: one zero bit */
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd); /* two zero bits */
    gf2_matrix_square(odd, even); /* four */
    do {                          /* then one zero byte, two, four... as len2's bits say */
        gf2_matrix_square(even, odd);
        if (len2 & 1) crc1 = gf2_matrix_times(even, crc1);
        len2 >>= 1;
        if (len2 == 0) break;
        gf2_matrix_square(odd, even);
        if (len2 & 1) crc1 = gf2_matrix_times(odd, crc1);
        len2 >>= 1;
    } while (len2);
    return crc1 ^ crc2;
}

#define THREE_WAY_MIN (1 << 18)

/* Large inputs: three independent streams over the three thirds, interleaved so the crc32
 * instruction's 3-cycle latency is hidden (~3x one stream), then joined with crc32c_combine. */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw3(uint32_t crc, const unsigned char *p, size_t n)
{
    size_t third = (n / 3) & ~(size_t)7;
    const unsigned char *a = p, *b = p + third, *c = p + 2 * third;
    uint64_t ca = (uint32_t)~crc, cb = 0xFFFFFFFFu, cc = 0xFFFFFFFFu;
    for (size_t i = 0; i < third; i += 8) {
        uint64_t va, vb, vc;
        memcpy(&va, a + i, 8);
        memcpy(&vb, b + i, 8);
        memcpy(&vc, c + i, 8);
        ca = _mm_crc32_u64(ca, va);
        cb = _mm_crc32_u64(cb, vb);
        cc = _mm_crc32_u64(cc, vc);
    }
    uint32_t r = crc32c_combine(~(uint32_t)ca, ~(uint32_t)cb, third);
    r = crc32c_combine(r, ~(uint32_t)cc, third);
    return crc32c_hw(r, p + 3 * third, n - 3 * third);
}

static int
cpu_has_sse42(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
#else
#define HAVE_SSE42_BUILD 0
#endif

static int hardware = 0;

/* CRC-32C of n bytes at p continuing from crc: three streams from THREE_WAY_MIN bytes, one
 * below (only called when `hardware`: without an SSE4.2 build it is never reached). */
static uint32_t
crc32c_any(uint32_t crc, const unsigned char *p, size_t n)
{
#if HAVE_SSE42_BUILD
    return n >= THREE_WAY_MIN ? crc32c_hw3(crc, p, n) : crc32c_hw(crc, p, n);
#else
    (void)crc;
    (void)p;
    (void)n;
    return 0;
#endif
}

static PyObject *
crc32c(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned long long start = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*|K:crc32c", &view, &start)) return NULL;
    if (start > 0xFFFFFFFFULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "crc must be a 32-bit value");
        return NULL;
    }
    if (!hardware) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "no SSE4.2 on this CPU or build");
        return NULL;
    }
    uint32_t result =
        crc32c_any((uint32_t)start, (const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(result);
}

/* Big-endian reads of the batch header fields (client/records/header.py's layout). */
static inline uint64_t
be64(const unsigned char *p)
{
    return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
           ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
           ((uint64_t)p[6] << 8) | (uint64_t)p[7];
}

static inline uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

static inline uint16_t
be16(const unsigned char *p)
{
    return (uint16_t)(((unsigned)p[0] << 8) | (unsigned)p[1]);
}

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_START 21
#define HEADER_FIELDS 13

/* The header at p (HEADER_SIZE bytes there) as a header_type instance, or NULL (error set). */
static PyObject *
make_header(PyTypeObject *type, const unsigned char *p)
{
    PyObject *h = type->tp_alloc(type, HEADER_FIELDS);
    if (h == NULL) return NULL;
    PyObject *v[HEADER_FIELDS];
    v[0] = PyLong_FromLongLong((int64_t)be64(p));          /* base_offset */
    v[1] = PyLong_FromLong((int32_t)be32(p + 8));          /* batch_length */
    v[2] = PyLong_FromLong((int32_t)be32(p + 12));         /* partition_leader_epoch */
    v[3] = PyLong_FromLong((int8_t)p[16]);                 /* magic */
    v[4] = PyLong_FromUnsignedLong(be32(p + 17));          /* crc */
    v[5] = PyLong_FromLong((int16_t)be16(p + 21));         /* attributes */
    v[6] = PyLong_FromLong((int32_t)be32(p + 23));         /* last_offset_delta */
    v[7] = PyLong_FromLongLong((int64_t)be64(p + 27));     /* base_timestamp */
    v[8] = PyLong_FromLongLong((int64_t)be64(p + 35));     /* max_timestamp */
    v[9] = PyLong_FromLongLong((int64_t)be64(p + 43));     /* producer_id */
    v[10] = PyLong_FromLong((int16_t)be16(p + 51));        /* producer_epoch */
    v[11] = PyLong_FromLong((int32_t)be32(p + 53));        /* base_sequence */
    v[12] = PyLong_FromLong((int32_t)be32(p + 57));        /* record_count */
    int failed = 0;
    for (int i = 0; i < HEADER_FIELDS; i++) {
        if (v[i] == NULL) failed = 1;
        PyTuple_SET_ITEM(h, i, v[i]); /* a NULL item is skipped by the tuple's dealloc */
    }
    if (failed) {
        Py_DECREF(h);
        return NULL;
    }
    /* only ints inside: it cannot be part of a cycle (the GC would untrack it anyway) */
    if (PyObject_GC_IsTracked(h)) PyObject_GC_UnTrack(h);
    return h;
}

/* validate_batches(buf, max_bytes, header_type): see the top of this file. The checks are
 * header.validate's and broker/log/batches.py validate_batches's, in the same terms; any
 * failure answers None and the Python path, run by the caller, raises its precise error. */
static PyObject *
validate_batches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "validate_batches(buf, max_bytes, header_type)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[2];
    if (!PyType_IsSubtype(type, &PyTuple_Type) ||
        type->tp_basicsize != PyTuple_Type.tp_basicsize ||
        type->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError,
                        "validate_batches: header_type must be a tuple subclass without slots");
        return NULL;
    }
    long long max_bytes = PyLong_AsLongLong(args[1]);
    if (max_bytes == -1 && PyErr_Occurred()) return NULL;
    if (!hardware) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_ND) < 0) {
        PyErr_Clear(); /* (not a contiguous buffer: the Python path deals with it) */
        Py_RETURN_NONE;
    }
    if (view.itemsize != 1 || view.ndim > 1) { /* len() would not count bytes: Python's too */
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    long long n = (long long)view.len, pos = 0;
    PyObject *list = NULL;
    if (n == 0) goto invalid;
    if ((list = PyList_New(0)) == NULL) goto done;
    while (pos < n) {
        const unsigned char *p = buf + pos;
        if (n - pos < HEADER_SIZE) goto invalid;
        long long batch_length = (int32_t)be32(p + 8);
        long long size = LOG_OVERHEAD + batch_length;
        if (max_bytes >= 0 && size > max_bytes) goto invalid;
        if ((int8_t)p[16] != 2) goto invalid; /* magic */
        if (batch_length < HEADER_SIZE - LOG_OVERHEAD) goto invalid;
        if (pos + size > n) goto invalid;
        long long delta = (int32_t)be32(p + 23), count = (int32_t)be32(p + 57);
        if (count < 0 || delta < 0 || count > delta + 1) goto invalid;
        if (crc32c_any(0, p + CRC_START, (size_t)(size - CRC_START)) != be32(p + 17))
            goto invalid;
        PyObject *h = make_header(type, p);
        if (h == NULL) goto fail;
        PyObject *pos_obj = PyLong_FromLongLong(pos);
        if (pos_obj == NULL) {
            Py_DECREF(h);
            goto fail;
        }
        PyObject *entry = PyTuple_New(2);
        if (entry == NULL) {
            Py_DECREF(h);
            Py_DECREF(pos_obj);
            goto fail;
        }
        PyTuple_SET_ITEM(entry, 0, pos_obj);
        PyTuple_SET_ITEM(entry, 1, h);
        int rc = PyList_Append(list, entry);
        Py_DECREF(entry);
        if (rc < 0) goto fail;
        pos += size;
    }
    goto done;
invalid:
    Py_XDECREF(list);
    list = Py_NewRef(Py_None);
    goto done;
fail:
    Py_CLEAR(list);
done:
    PyBuffer_Release(&view);
    return list;
}

static PyMethodDef methods[] = {
    {"crc32c", crc32c, METH_VARARGS,
     "crc32c(data, crc=0) -> int\n\nCRC-32C of any buffer, continuing from crc (SSE4.2)."},
    {"validate_batches", (PyCFunction)(void (*)(void))validate_batches, METH_FASTCALL,
     "validate_batches(buf, max_bytes, header_type) -> list | None\n\n"
     "[(position, header_type(*fields)), ...] of the batches filling buf, every check of "
     "client.records.header.validate passed (CRC included) and none over max_bytes (when >= "
     "0); None when empty or any check fails (the Python path then says why)."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *m)
{
#if HAVE_SSE42_BUILD
    hardware = cpu_has_sse42();
#endif
    return PyModule_AddObjectRef(m, "HARDWARE", hardware ? Py_True : Py_False);
}

static struct PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "client.records._crc",
    .m_doc = "CRC-32C with SSE4.2 on any buffer (see client/records/crc.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__crc(void)
{
    return PyModuleDef_Init(&module);
}
