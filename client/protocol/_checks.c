/* client.protocol._checks: client/protocol/fast_checks.py's two checks in C (issue 28).
 *
 * One producer spreading records over 1,000 RF=3 partitions makes every Produce and Fetch
 * answer carry hundreds of one-batch partition entries, and each entry is checked four to six
 * times on its way (the leader checks the Fetch answers it sends to two followers, each
 * follower the one it receives; the broker and the producer the Produce answer). In Python
 * that was 1.5-2.7 us a Fetch entry and ~1 us a Produce entry on a slow machine: a few per
 * cent of the whole machine's CPU per round-robin record. These functions do the same in one
 * C pass, with the same answers:
 *
 * produce_response(raw) -> raw | None
 *     fast_checks.produce_response: `raw` if it is a complete, valid Produce response.
 *
 * fetch_response(raw) -> raw | None
 *     fast_checks.fetch_response: `raw` with its omitted optional fields filled in place (in
 *     the entries' own dicts), if it is then exactly what the schema check returns; else None
 *     (what was filled stays filled, as in Python).
 *
 * The defaults are those of fast_checks._FETCH_PARTITION_DEFAULTS (plus a new empty list for
 * `aborted_transactions`); tests/unit/protocol/test_protocol_fast_checks.py holds both
 * implementations to the schema check's answers and to each other's, fills included.
 *
 * "type(x) is int" is PyLong_CheckExact (a bool is not an int here, as in Python); a range is
 * checked on the value as a C long long, an int that does not fit one being out of range.
 * The bodies' dicts are exact dicts, looked up with interned str keys (a key of another type
 * in a body compares by its own C equality: those msgpack decodes to, and the handlers' own,
 * are str, int and bytes). As the Python checks, these are not atomic: the fill's new list
 * may start a collection, hence finalizers; a body is its sender's or receiver's own.
 *
 * Thread: any, with the GIL held.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

enum {
    K_THROTTLE, K_TOPICS, K_NAME, K_PARTITIONS, K_PARTITION, K_ERROR_CODE, K_ERROR_MESSAGE,
    K_BASE_OFFSET, K_APPEND_TIME, K_LOG_START, K_HW, K_LSO, K_RECORDS, K_DIV_EPOCH, K_DIV_END,
    K_ABORTED, K_SESSION_ID, K_PRODUCER_ID, K_FIRST_OFFSET, K_COUNT
};

static const char *const key_names[K_COUNT] = {
    "throttle_time_ms", "topics", "name", "partitions", "partition", "error_code",
    "error_message", "base_offset", "log_append_time_ms", "log_start_offset", "high_watermark",
    "last_stable_offset", "records", "diverging_epoch", "diverging_end_offset",
    "aborted_transactions", "session_id", "producer_id", "first_offset",
};

static PyObject *keys[K_COUNT];
/* {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
 * "diverging_epoch": -1, "diverging_end_offset": -1}: fast_checks._FETCH_PARTITION_DEFAULTS */
static PyObject *fetch_defaults;

#define FETCH_PARTITION_FIELDS 9 /* the defaults, partition, error_code, aborted_transactions */

/* `v` is an exact int in [lo, hi) (bounds as in fast_checks: -2**(n-1) <= v < 2**(n-1)). */
static int
int_in(PyObject *v, long long lo, long long hi_inclusive)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return 0; /* beyond 64 bits: out of every range here */
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return x >= lo && x <= hi_inclusive;
}

#define INT16(v) int_in((v), INT16_MIN, INT16_MAX)
#define INT32(v) int_in((v), INT32_MIN, INT32_MAX)
#define INT64(v) int_in((v), INT64_MIN, INT64_MAX)

/* dict lookup of an interned key; NULL when absent (a lookup error is cleared: it cannot be
 * the answer of a valid body, and the caller then refuses it). */
static PyObject *
get(PyObject *d, int k)
{
    PyObject *v = PyDict_GetItemWithError(d, keys[k]);
    if (v == NULL && PyErr_Occurred())
        PyErr_Clear();
    return v;
}

/* fast_checks._produce_partitions */
static int
produce_partitions(PyObject *parts)
{
    Py_ssize_t n = PyList_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        if (!PyDict_CheckExact(p) || PyDict_GET_SIZE(p) != 6)
            return 0;
        PyObject *message = get(p, K_ERROR_MESSAGE);
        if (message == NULL || (message != Py_None && !PyUnicode_CheckExact(message)))
            return 0;
        if (!INT32(get(p, K_PARTITION)) || !INT16(get(p, K_ERROR_CODE))
            || !INT64(get(p, K_BASE_OFFSET)) || !INT64(get(p, K_APPEND_TIME))
            || !INT64(get(p, K_LOG_START)))
            return 0;
    }
    return 1;
}

/* The aborted transactions of a Fetch partition entry: {producer_id, first_offset} each. */
static int
aborted_ok(PyObject *aborted)
{
    Py_ssize_t n = PyList_GET_SIZE(aborted);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(aborted, i);
        if (!PyDict_CheckExact(a) || PyDict_GET_SIZE(a) != 2)
            return 0;
        if (!INT64(get(a, K_PRODUCER_ID)) || !INT64(get(a, K_FIRST_OFFSET)))
            return 0;
    }
    return 1;
}

/* fast_checks._fetch_partitions: 1 accepted, 0 refused, -1 error (memory) */
static int
fetch_partitions(PyObject *parts)
{
    Py_ssize_t n = PyList_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        if (!PyDict_CheckExact(p))
            return 0;
        if (PyDict_GET_SIZE(p) < FETCH_PARTITION_FIELDS) {
            /* for k, v in defaults.items(): p.setdefault(k, v)
             * p.setdefault("aborted_transactions", []) */
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            while (PyDict_Next(fetch_defaults, &pos, &k, &v)) {
                if (PyDict_SetDefault(p, k, v) == NULL)
                    return -1;
            }
            if (get(p, K_ABORTED) == NULL) {
                PyObject *empty = PyList_New(0);
                if (empty == NULL || PyDict_SetItem(p, keys[K_ABORTED], empty) < 0) {
                    Py_XDECREF(empty);
                    return -1;
                }
                Py_DECREF(empty);
            }
        }
        if (PyDict_GET_SIZE(p) != FETCH_PARTITION_FIELDS)
            return 0; /* (filled: no other key) */
        PyObject *records = get(p, K_RECORDS);
        PyObject *aborted = get(p, K_ABORTED);
        if (records == NULL
            || !(PyBytes_CheckExact(records) || Py_IS_TYPE(records, &PyMemoryView_Type)))
            return 0;
        if (aborted == NULL || !PyList_CheckExact(aborted))
            return 0;
        if (!INT32(get(p, K_PARTITION)) || !INT16(get(p, K_ERROR_CODE))
            || !INT64(get(p, K_HW)) || !INT64(get(p, K_LSO)) || !INT64(get(p, K_LOG_START))
            || !INT32(get(p, K_DIV_EPOCH)) || !INT64(get(p, K_DIV_END)))
            return 0;
        if (!aborted_ok(aborted))
            return 0;
    }
    return 1;
}

/* fast_checks._topics: 1 accepted, 0 refused, -1 error */
static int
topics_ok(PyObject *topics, int (*partitions)(PyObject *))
{
    Py_ssize_t n = PyList_GET_SIZE(topics);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        if (!PyDict_CheckExact(t) || PyDict_GET_SIZE(t) != 2)
            return 0;
        PyObject *name = get(t, K_NAME);
        if (name == NULL || !PyUnicode_CheckExact(name))
            return 0;
        PyObject *parts = get(t, K_PARTITIONS);
        if (parts == NULL || !PyList_CheckExact(parts))
            return 0;
        Py_INCREF(parts); /* (held while its entries are filled: a new list may collect) */
        int ok = partitions(parts);
        Py_DECREF(parts);
        if (ok != 1)
            return ok;
    }
    return 1;
}

static PyObject *
produce_response(PyObject *module, PyObject *raw)
{
    if (!PyDict_CheckExact(raw) || PyDict_GET_SIZE(raw) != 2)
        Py_RETURN_NONE;
    PyObject *topics = get(raw, K_TOPICS);
    if (!INT32(get(raw, K_THROTTLE)) || topics == NULL || !PyList_CheckExact(topics))
        Py_RETURN_NONE;
    if (!topics_ok(topics, produce_partitions))
        Py_RETURN_NONE;
    return Py_NewRef(raw);
}

/* raw.setdefault(key, value) */
static int
set_default(PyObject *raw, int k, PyObject *value)
{
    PyObject *got = PyDict_SetDefault(raw, keys[k], value);
    return got == NULL ? -1 : 0;
}

static PyObject *
fetch_response(PyObject *module, PyObject *raw)
{
    if (!PyDict_CheckExact(raw))
        Py_RETURN_NONE;
    /* code, session_id, throttle: raw.get(key, 0), each an int of its range */
    static const int scalars[3] = {K_ERROR_CODE, K_SESSION_ID, K_THROTTLE};
    for (int j = 0; j < 3; j++) {
        PyObject *v = get(raw, scalars[j]);
        if (v != NULL && !(j == 0 ? INT16(v) : INT32(v)))
            Py_RETURN_NONE;
    }
    /* `topics` owned from here to the end: raw's, or a new empty list when it has none */
    PyObject *topics = get(raw, K_TOPICS);
    if (topics == NULL) {
        topics = PyList_New(0);
        if (topics == NULL)
            return NULL;
    }
    else if (!PyList_CheckExact(topics))
        Py_RETURN_NONE;
    else
        Py_INCREF(topics);
    PyObject *result = NULL; /* (NULL: an error) */
    int ok = topics_ok(topics, fetch_partitions);
    if (ok == 0)
        result = Py_NewRef(Py_None);
    else if (ok == 1) {
        PyObject *zero = PyLong_FromLong(0);
        if (zero != NULL && set_default(raw, K_ERROR_CODE, zero) == 0
            && set_default(raw, K_SESSION_ID, zero) == 0 && set_default(raw, K_THROTTLE, zero) == 0
            && set_default(raw, K_TOPICS, topics) == 0)
            /* (filled: no other key) */
            result = Py_NewRef(PyDict_GET_SIZE(raw) == 4 ? raw : Py_None);
        Py_XDECREF(zero);
    }
    Py_DECREF(topics);
    return result;
}

static PyMethodDef methods[] = {
    {"produce_response", produce_response, METH_O,
     "produce_response(raw) -> raw | None\n\nfast_checks.produce_response in C."},
    {"fetch_response", fetch_response, METH_O,
     "fetch_response(raw) -> raw | None\n\nfast_checks.fetch_response in C (fills in place)."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    for (int k = 0; k < K_COUNT; k++) {
        if (keys[k] == NULL) {
            keys[k] = PyUnicode_InternFromString(key_names[k]);
            if (keys[k] == NULL)
                return -1;
        }
    }
    if (fetch_defaults == NULL) {
        PyObject *d = PyDict_New();
        PyObject *minus_one = PyLong_FromLong(-1);
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
        static const int minus_one_keys[5] = {K_HW, K_LSO, K_LOG_START, K_DIV_EPOCH, K_DIV_END};
        int failed = d == NULL || minus_one == NULL || empty == NULL;
        /* in _FETCH_PARTITION_DEFAULTS' order: hw, lso, log start, records, the two diverging */
        for (int j = 0; !failed && j < 3; j++)
            failed = PyDict_SetItem(d, keys[minus_one_keys[j]], minus_one) < 0;
        failed = failed || PyDict_SetItem(d, keys[K_RECORDS], empty) < 0;
        for (int j = 3; !failed && j < 5; j++)
            failed = PyDict_SetItem(d, keys[minus_one_keys[j]], minus_one) < 0;
        Py_XDECREF(minus_one);
        Py_XDECREF(empty);
        if (failed) {
            Py_XDECREF(d);
            return -1;
        }
        fetch_defaults = d;
    }
    return 0;
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
    .m_name = "client.protocol._checks",
    .m_doc = "The Produce and Fetch response checks of client/protocol/fast_checks.py, in C.",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__checks(void)
{
    return PyModuleDef_Init(&module);
}
